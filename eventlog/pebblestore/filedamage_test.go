package pebblestore_test

import (
	"bytes"
	bgctx "context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// These tests damage the files of a log (not through Pebble's API): bit
// flips, truncations and deleted files in the write-ahead log, the tables
// and the MANIFEST. After each, a read-only Open and a read of everything
// either return an error wrapping eventlog.ErrCorrupt that names what is
// damaged, or read back exactly what was written; the process never exits
// and no file is changed.

// logImage is what a test log holds: every execution's events.
type logImage map[eventlog.ID][]eventlog.Event

// writeLog writes three executions (one a fork) to dir, one append per
// event, and returns what they hold. It leaves the store open when crash
// is true (the caller copies the folder: the image of a crash).
func writeLog(t *testing.T, dir string, crash bool) (*pebblestore.Store, logImage) {
	t.Helper()
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := create(t, s, "alpha")
	b := create(t, s, "beta")
	for i := range 12 {
		appendAll(t, s, a, dispatch(uint64(i+1)))
		appendAll(t, s, b, dispatch(uint64(i+1)))
	}
	f, err := s.Fork(t.Context(), a, 5, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		appendAll(t, s, f, dispatch(uint64(20+i)))
	}
	img := logImage{}
	for _, id := range []eventlog.ID{a, b, f} {
		img[id] = events(t, s, id, 1)
	}
	if !crash {
		// A second session: the MANIFEST then holds edits on edits, and
		// losing its last one would leave an older, consistent log.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openDir(t, dir)
		appendAll(t, s, a, dispatch(31), dispatch(32))
		img[a] = events(t, s, a, 1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return nil, img
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, img
}

// readAll opens dir read-only and reads every execution. It returns the
// first error.
func readAll(dir string) (logImage, error) {
	s, err := pebblestore.Open(dir, pebblestore.ReadOnly())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	img := logImage{}
	ctx := bgctx.Background()
	for info, err := range s.List(ctx, eventlog.Filter{}) {
		if err != nil {
			return img, err
		}
		var evs []eventlog.Event
		for ev, err := range s.Events(ctx, info.ID, 1) {
			if err != nil {
				return img, err
			}
			evs = append(evs, ev)
		}
		if _, err := s.ResourceStates(ctx, info.ID, info.Head); err != nil {
			return img, err
		}
		img[info.ID] = evs
	}
	return img, nil
}

// folder is the name and content of every file of a folder.
type folder map[string][]byte

func readFolder(t *testing.T, dir string) folder {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := folder{}
	for _, e := range entries {
		if e.Name() == "FORKLINE-BALLAST" { // 8 MiB of zeros, not the log's
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f[e.Name()] = b
	}
	return f
}

func (f folder) write(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range f {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameFolder reports how dir differs from want ("" when it does not).
func sameFolder(t *testing.T, dir string, want folder) string {
	t.Helper()
	got := readFolder(t, dir)
	var d []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		b, ok := got[name]
		switch {
		case !ok:
			d = append(d, name+" deleted")
		case !bytes.Equal(b, want[name]):
			d = append(d, name+" changed")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			d = append(d, name+" created")
		}
	}
	return strings.Join(d, ", ")
}

// fileOf returns the one file of f whose name has the suffix (or prefix).
func fileOf(t *testing.T, f folder, match func(string) bool) string {
	t.Helper()
	var names []string
	for name := range f {
		if match(name) {
			names = append(names, name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("want one file, found %v among %v", names, slices.Sorted(maps.Keys(f)))
	}
	return names[0]
}

// offsets returns n offsets spread over [lo, hi), and lo and hi-1.
func offsets(lo, hi, n int) []int {
	out := []int{lo, hi - 1}
	for i := 1; i < n; i++ {
		out = append(out, lo+(hi-lo)*i/n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// damageCase applies one damage to a fresh copy of base and checks the
// outcome: ErrCorrupt naming what (returned true), or the whole image read
// back (returned false, allowed only when intactOK says so).
func damageCase(t *testing.T, base folder, img logImage, label, what string, damage func(dir string)) bool {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	base.write(t, dir)
	damage(dir)
	before := readFolder(t, dir)
	got, err := readAll(dir)
	if d := sameFolder(t, dir, before); d != "" {
		t.Errorf("%s: the read-only open changed the folder: %s", label, d)
	}
	if err == nil {
		if !equalImages(img, got) {
			t.Errorf("%s: read back a different log and no error:\n%s", label, diff(img, got))
		}
		return false
	}
	if !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("%s: error %v does not wrap ErrCorrupt", label, err)
	} else if !strings.Contains(err.Error(), what) {
		t.Errorf("%s: error %q does not name %q", label, err, what)
	}
	return true
}

// prefixImage reports whether got holds, for every execution of img, a
// prefix of its events (an execution whose records were all dropped may be
// missing).
func prefixImage(img, got logImage) bool {
	for id, evs := range got {
		want, ok := img[id]
		if !ok || len(evs) > len(want) || !eventsEqual(evs, want[:len(evs)]) {
			return false
		}
	}
	return true
}

func equalImages(a, b logImage) bool {
	if len(a) != len(b) {
		return false
	}
	for id, evs := range a {
		if !eventsEqual(evs, b[id]) {
			return false
		}
	}
	return true
}

func flipAt(name string, off int) func(dir string) {
	return func(dir string) {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		b[off] ^= 1 << (off % 8)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			panic(err)
		}
	}
}

func truncateAt(name string, n int) func(dir string) {
	return func(dir string) {
		if err := os.Truncate(filepath.Join(dir, name), int64(n)); err != nil {
			panic(err)
		}
	}
}

func removeFiles(match func(string) bool) func(dir string) {
	return func(dir string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			panic(err)
		}
		for _, e := range entries {
			if match(e.Name()) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					panic(err)
				}
			}
		}
	}
}

func hasSuffix(s string) func(string) bool {
	return func(n string) bool { return strings.HasSuffix(n, s) }
}

func hasPrefix(s string) func(string) bool {
	return func(n string) bool { return strings.HasPrefix(n, s) }
}

// cleanLog writes a log to a folder and closes it; it returns the folder's
// files (without the ballast) and what the log holds.
func cleanLog(t *testing.T) (folder, logImage) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	_, img := writeLog(t, dir, false)
	return readFolder(t, dir), img
}

// largest returns the name of the largest file of f whose name matches.
func largest(t *testing.T, f folder, match func(string) bool) string {
	t.Helper()
	name := ""
	for n, b := range f {
		if match(n) && (name == "" || len(b) > len(f[name])) {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("no such file among %v", slices.Sorted(maps.Keys(f)))
	}
	return name
}

// newest returns the name of f's newest file that match accepts: Pebble
// numbers its files in order, so the greatest name is the newest file (for
// logs, the one being written).
func newest(t *testing.T, f folder, match func(string) bool) string {
	t.Helper()
	name := ""
	for n := range f {
		if match(n) && n > name {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("no such file among %v", slices.Sorted(maps.Keys(f)))
	}
	return name
}

// A bit flipped anywhere in the table that holds the data is reported as
// corruption naming the table by the read that meets it; nothing is written.
func TestDamagedTableBitFlips(t *testing.T) {
	base, img := cleanLog(t)
	sst := largest(t, base, hasSuffix(".sst"))
	for _, off := range offsets(0, len(base[sst]), 40) {
		label := fmt.Sprintf("flip %s byte %d", sst, off)
		if !damageCase(t, base, img, label, sst, flipAt(sst, off)) {
			t.Errorf("%s: not detected", label)
		}
	}
}

// A table cut short, or deleted, is reported at Open, naming it.
func TestTruncatedOrDeletedTable(t *testing.T) {
	base, img := cleanLog(t)
	sst := largest(t, base, hasSuffix(".sst"))
	for _, n := range offsets(0, len(base[sst]), 6) {
		label := fmt.Sprintf("truncate %s to %d bytes", sst, n)
		if !damageCase(t, base, img, label, sst, truncateAt(sst, n)) {
			t.Errorf("%s: not detected", label)
		}
	}
	if !damageCase(t, base, img, "delete "+sst, sst+" is missing", removeFiles(func(n string) bool { return n == sst })) {
		t.Errorf("delete %s: not detected", sst)
	}
}

// currentManifest returns the MANIFEST named by Pebble's marker (an older
// one may be kept beside it).
func currentManifest(t *testing.T, f folder) string {
	t.Helper()
	marker := fileOf(t, f, hasPrefix("marker.manifest."))
	name := marker[strings.Index(marker, "MANIFEST-"):]
	if _, ok := f[name]; !ok {
		t.Fatalf("marker %s names a missing file", marker)
	}
	return name
}

// A bit flipped anywhere in the MANIFEST is reported as corruption naming
// it, whether Pebble sees it or takes it for a torn tail and the clean-close
// record shows the tables it lost; also when the write-ahead logs that
// would let Pebble rebuild the lost tables are gone.
func TestDamagedManifestBitFlips(t *testing.T) {
	base, img := cleanLog(t)
	man := currentManifest(t, base)
	noWAL := maps.Clone(base)
	for n := range noWAL {
		if strings.HasSuffix(n, ".log") {
			delete(noWAL, n)
		}
	}
	for _, f := range []struct {
		name  string
		files folder
	}{{"", base}, {" without the logs", noWAL}} {
		for _, off := range offsets(0, len(base[man]), 24) {
			label := fmt.Sprintf("flip %s byte %d%s", man, off, f.name)
			if !damageCase(t, f.files, img, label, "MANIFEST", flipAt(man, off)) {
				t.Errorf("%s: not detected", label)
			}
		}
	}
	for _, n := range offsets(0, len(base[man]), 6) {
		label := fmt.Sprintf("truncate %s to %d bytes", man, n)
		if !damageCase(t, noWAL, img, label, "MANIFEST", truncateAt(man, n)) {
			t.Errorf("%s: not detected", label)
		}
	}
}

// A log that lost its MANIFEST is not a new log: Open, read-only or not,
// reports corruption and leaves every file as it was (before, Pebble
// created a new database and deleted the tables holding the data).
func TestMissingManifest(t *testing.T) {
	base, img := cleanLog(t)
	manifest := func(n string) bool {
		return strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest.")
	}
	if !damageCase(t, base, img, "delete the MANIFEST", "MANIFEST is missing", removeFiles(manifest)) {
		t.Fatal("a log without its MANIFEST opened read-only")
	}
	// Also without forkline's marker: Pebble's other files are enough.
	noMarker := maps.Clone(base)
	delete(noMarker, "FORKLINE")
	delete(noMarker, "FORKLINE-CLOSED")
	for _, f := range []folder{base, noMarker} {
		dir := filepath.Join(t.TempDir(), "log")
		f.write(t, dir)
		removeFiles(manifest)(dir)
		before := readFolder(t, dir)
		s, err := pebblestore.Open(dir)
		if err == nil {
			s.Close()
			t.Fatal("Open for writing of a log without its MANIFEST succeeded")
		}
		if !errors.Is(err, eventlog.ErrCorrupt) || !strings.Contains(err.Error(), "MANIFEST is missing") {
			t.Errorf("Open = %v, want ErrCorrupt naming the MANIFEST", err)
		}
		if d := sameFolder(t, dir, before); d != "" {
			t.Errorf("Open for writing changed the folder: %s", d)
		}
	}
}

// After a clean Close the write-ahead logs hold nothing a reopen needs:
// damage to them loses nothing.
func TestDamagedLogAfterCleanClose(t *testing.T) {
	base, img := cleanLog(t)
	for name, b := range base {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		for _, off := range offsets(0, len(b), 8) {
			label := fmt.Sprintf("flip %s byte %d", name, off)
			if damageCase(t, base, img, label, "", flipAt(name, off)) {
				t.Errorf("%s: reported as corruption after a clean close", label)
			}
		}
		for _, n := range offsets(0, len(b), 4) {
			label := fmt.Sprintf("truncate %s to %d bytes", name, n)
			if damageCase(t, base, img, label, "", truncateAt(name, n)) {
				t.Errorf("%s: reported as corruption after a clean close", label)
			}
		}
	}
}

// crashLog writes a log and, without closing it, copies its folder: the
// image of a crash. It returns the image, what the log held, the write-ahead
// log holding the data, and that log's size before the last (synced)
// append, whose execution and events are last and lastEvs.
func crashLog(t *testing.T) (f folder, img logImage, wal string, beforeLast int, last eventlog.ID) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	s, img := writeLog(t, dir, true)
	before := readFolder(t, dir)
	for id := range img {
		last = id
		break
	}
	appendAll(t, s, last, dispatch(99))
	img[last] = events(t, s, last, 1)
	f = readFolder(t, dir)
	// The log being written holds the last record (Pebble may have begun
	// a new one since the folder was read before it).
	wal = newest(t, f, hasSuffix(".log"))
	beforeLast = len(before[wal])
	return f, img, wal, beforeLast, last
}

// After a crash, a bit flipped in any synced record of the write-ahead log
// but the last is reported as corruption naming the log: a later record
// says the log was synced past it. (Before, Pebble replayed up to the flip
// and dropped the rest without a word.) A flip in the last record cannot be
// told from a torn write: then exactly that record is lost.
func TestDamagedLogAfterCrash(t *testing.T) {
	f, img, wal, beforeLast, last := crashLog(t)
	detected := 0
	for _, off := range offsets(0, len(f[wal]), 40) {
		label := fmt.Sprintf("flip %s byte %d of %d", wal, off, len(f[wal]))
		dir := filepath.Join(t.TempDir(), "log")
		f.write(t, dir)
		flipAt(wal, off)(dir)
		got, err := readAll(dir)
		switch {
		case err != nil && errors.Is(err, eventlog.ErrCorrupt) && strings.Contains(err.Error(), wal):
			detected++
		case err != nil:
			t.Errorf("%s: %v, want ErrCorrupt naming %s", label, err, wal)
		case off < beforeLast && pebblestore.SyncProves(f[wal], wal, int64(off)):
			t.Errorf("%s: damage before the last synced record read back without an error", label)
		case off < beforeLast:
			// Pebble writes into each chunk how far the log was synced as
			// its flusher knew then; when that lags (it does under the race
			// detector's timing), no later chunk proves this record was
			// synced, and the damage cannot be told from a torn write.
			// Then the records from it on are dropped, and nothing else.
			if !prefixImage(img, got) {
				t.Errorf("%s: with no proof of sync past it, want a prefix of every lineage:\n%s", label, diff(img, got))
			}
		default:
			want := maps.Clone(img)
			want[last] = want[last][:len(want[last])-1]
			if !equalImages(want, got) {
				t.Errorf("%s: want all but the last record:\n%s", label, diff(want, got))
			}
		}
	}
	if detected == 0 {
		t.Error("no flip detected")
	}
}

// After a crash, a torn tail of unsynced appends is tolerated: every synced
// event is read back, whatever is cut from the tail or damaged in it.
func TestTornTailAfterCrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	s, img := writeLog(t, dir, true)
	synced := readFolder(t, dir)
	syncedWAL := newest(t, synced, hasSuffix(".log"))
	var id eventlog.ID
	for id = range img {
		break
	}
	head := uint64(len(img[id]))
	// Pebble writes unsynced records to the file a 32 KiB block at a time:
	// enough of them to fill a few.
	for i := range 1500 {
		if _, err := s.AppendUnsynced(t.Context(), id, head+uint64(i), dispatch(uint64(200+i))); err != nil {
			t.Fatal(err)
		}
	}
	// Unsynced writes reach the file soon, not at once.
	deadline := time.Now().Add(5 * time.Second)
	var f folder
	for {
		f = readFolder(t, dir)
		if len(f[syncedWAL]) > len(synced[syncedWAL])+32<<10 || newest(t, f, hasSuffix(".log")) != syncedWAL ||
			time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A crash tears the tail of the log being written; a log Pebble moved
	// on from was synced when it did. (The appends may have filled the
	// memtable, so that Pebble began a new log.)
	wal := newest(t, f, hasSuffix(".log"))
	syncedEnd := len(synced[wal]) // 0 for a log begun after the last sync
	if len(f[wal]) <= syncedEnd {
		t.Fatalf("the unsynced appends did not reach %s", wal)
	}
	cases := map[string]func(string){}
	for _, n := range offsets(syncedEnd, len(f[wal])+1, 8) {
		cases[fmt.Sprintf("truncate %s to %d bytes (synced to %d)", wal, n, syncedEnd)] = truncateAt(wal, n)
	}
	for _, off := range offsets(syncedEnd, len(f[wal]), 8) {
		cases[fmt.Sprintf("flip %s byte %d (synced to %d)", wal, off, syncedEnd)] = flipAt(wal, off)
	}
	for label, damage := range cases {
		d := filepath.Join(t.TempDir(), "log")
		f.write(t, d)
		damage(d)
		before := readFolder(t, d)
		got, err := readAll(d)
		if err != nil {
			t.Errorf("%s: %v", label, err)
			continue
		}
		if diff := sameFolder(t, d, before); diff != "" {
			t.Errorf("%s: the read-only open changed the folder: %s", label, diff)
		}
		for x, evs := range img {
			if len(got[x]) < len(evs) || !eventsEqual(evs, got[x][:len(evs)]) {
				t.Errorf("%s: execution %s lost synced events: %d read, %d synced", label, x, len(got[x]), len(evs))
			}
		}
	}
}

// A damaged table met by Open for writing (its first block holds the format
// key) or by a read gives an error wrapping ErrCorrupt: Pebble's corruption report no longer exits the
// process, and the damaged table is neither rewritten nor deleted.
func TestDamagedTableReadWrite(t *testing.T) {
	base, _ := cleanLog(t)
	sst := largest(t, base, hasSuffix(".sst"))
	dir := filepath.Join(t.TempDir(), "log")
	base.write(t, dir)
	flipAt(sst, len(base[sst])/3)(dir)
	damaged, err := os.ReadFile(filepath.Join(dir, sst))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pebblestore.Open(dir)
	readErr := err
	if err == nil {
		for info, err := range s.List(t.Context(), eventlog.Filter{}) {
			if err != nil {
				readErr = err
				break
			}
			if _, err := collect(t, s.Events(t.Context(), info.ID, 1)); err != nil {
				readErr = err
				break
			}
		}
		if err := s.Close(); err != nil {
			t.Logf("Close: %v", err)
		}
	}
	if !errors.Is(readErr, eventlog.ErrCorrupt) || !strings.Contains(readErr.Error(), sst) {
		t.Errorf("Open and read = %v, want ErrCorrupt naming %s", readErr, sst)
	}
	if after, err := os.ReadFile(filepath.Join(dir, sst)); err != nil || !bytes.Equal(after, damaged) {
		t.Errorf("%s was rewritten or deleted (%v)", sst, err)
	}
}
