package reliability

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/forkline/forkline/sdk"
)

// dataFolder is a forkline data folder laid out as cmd/forkline expects it
// (dir/log: the event log; dir/dirfs: the coder agent's workspace store)
// holding a completed coder execution and a fork of it that never ran.
type dataFolder struct {
	dir    string
	url    string      // the scripted model
	exec   eventlog.ID // the completed execution
	fork   eventlog.ID // a fork of exec at forkAt
	forkAt uint64
	events []eventlog.Event // exec's lineage
}

func (f *dataFolder) logDir() string   { return filepath.Join(f.dir, "log") }
func (f *dataFolder) storeDir() string { return filepath.Join(f.dir, "dirfs") }

func newDataFolder(t *testing.T) *dataFolder {
	t.Helper()
	url, stop, err := scriptedmodel.Serve(coder.Script())
	if err != nil {
		t.Fatal(err)
	}
	// The model is needed only to make the folder: no run of these tests
	// gets as far as a model call. Stopping it frees its port for the
	// forkline command, which serves its own scripted model where the
	// recorded calls went.
	defer stop()
	f := &dataFolder{dir: t.TempDir(), url: url}
	store, err := pebblestore.Open(f.logDir(), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k := f.kernel(t, store)
	ctx := context.Background()
	if f.exec, err = k.Start(ctx, "coder", coder.Input{Task: task}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, f.exec); err != nil {
		t.Fatal(err)
	}
	f.events = lineage(t, store, f.exec)
	f.forkAt = uint64(len(f.events)) / 2
	if f.fork, err = k.Fork(ctx, f.exec, f.forkAt); err != nil {
		t.Fatal(err)
	}
	return f
}

// kernel opens a kernel on store with the coder agent on the folder's
// workspace store.
func (f *dataFolder) kernel(t *testing.T, store eventlog.IndexedLog) *sdk.Kernel {
	t.Helper()
	k, err := sdk.New(store)
	if err != nil {
		t.Fatal(err)
	}
	cfg := dirfs.Config{Store: f.storeDir(), NoSync: true}
	model := coder.Model{Name: coder.ScriptedName, BaseURL: f.url, APIKey: "reliability"}
	if _, err := sdk.Register(k, "coder", coder.Handler(func() driver.Driver[*dirfs.Workspace, dirfs.Binding] { return dirfs.New(cfg) }, model)); err != nil {
		t.Fatal(err)
	}
	return k
}

// The keys of pebblestore's layout (eventlog/pebblestore/keys.go).
func eventKey(id eventlog.ID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{'e'}, id[:]...), seq)
}

func indexKey(id eventlog.ID, key string, seq uint64) []byte {
	k := binary.BigEndian.AppendUint16(append([]byte{'i'}, id[:]...), uint16(len(key)))
	return binary.BigEndian.AppendUint64(append(k, key...), seq)
}

func headerKey(id eventlog.ID) []byte { return append([]byte{'x'}, id[:]...) }

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// rewriteValue opens the closed log in dir with Pebble itself and replaces
// the value of key by damage(value); a nil result deletes the key.
func rewriteValue(t *testing.T, dir string, key []byte, damage func([]byte) []byte) {
	t.Helper()
	// Pebble itself changes the tables behind pebblestore's back: drop
	// pebblestore's clean-close record, as its own Open for writing does,
	// or the next Open reports the MANIFEST as damaged.
	if err := os.Remove(filepath.Join(dir, "FORKLINE-CLOSED")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("key %x: %v", key, err)
	}
	damaged := damage(bytes.Clone(v))
	_ = closer.Close()
	if damaged == nil {
		err = db.Delete(key, pebble.Sync)
	} else {
		err = db.Set(key, damaged, pebble.Sync)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readValue returns the value of key in the closed log in dir.
func readValue(t *testing.T, dir string, key []byte) []byte {
	t.Helper()
	var out []byte
	rewriteValue(t, dir, key, func(v []byte) []byte { out = bytes.Clone(v); return v })
	return out
}

// copyTree copies the folder src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if de.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damage is one way to hurt a stored value.
type damage struct {
	name string
	fn   func([]byte) []byte // nil result: delete the key
}

func flipBit(pos int, bit uint) damage {
	return damage{fmt.Sprintf("flip byte %d bit %d", pos, bit), func(v []byte) []byte {
		v[pos%len(v)] ^= 1 << bit
		return v
	}}
}

func truncateTo(n int) damage {
	return damage{fmt.Sprintf("truncate to %d bytes", n), func(v []byte) []byte { return v[:min(n, len(v))] }}
}

var (
	extend    = damage{"extend by one byte", func(v []byte) []byte { return append(v, 0xc0) }}
	deleteKey = damage{"delete", func([]byte) []byte { return nil }}
)

// corruptCase is one damaged record of the data folder.
type corruptCase struct {
	name string
	key  []byte
	dmg  damage
	exec eventlog.ID // the execution the error must name
	seq  uint64      // … and the seq (0 for a header)
	cli  bool        // also ask the forkline command
}

// DESIGN §3: a truncated or corrupt record is an error that names the
// execution and the seq — never a panic, never a silently skipped event —
// for every reader: the log, Run, a fork whose prefix holds it, and the
// forkline command.
func TestCorruptEvents(t *testing.T) {
	f := newDataFolder(t)
	rng := rand.New(rand.NewPCG(uint64(len(f.events)), 8))
	var cases []corruptCase
	// The first event of every kind, and the fork's own fork.created: one
	// random bit flipped (every event with -reliability.exhaustive).
	kinds := map[eventlog.Kind]bool{}
	for _, ev := range f.events {
		if kinds[ev.Kind()] && !*exhaustiveFlag {
			continue
		}
		kinds[ev.Kind()] = true
		rec := readValue(t, f.logDir(), eventKey(f.exec, ev.Seq))
		cases = append(cases, corruptCase{
			name: fmt.Sprintf("seq %d %s", ev.Seq, ev.Kind()),
			key:  eventKey(f.exec, ev.Seq), dmg: flipBit(rng.IntN(len(rec)), uint(rng.IntN(8))),
			exec: f.exec, seq: ev.Seq,
		})
	}
	cases = append(cases, corruptCase{name: "fork.created", key: eventKey(f.fork, f.forkAt+1),
		dmg: flipBit(20, 3), exec: f.fork, seq: f.forkAt + 1, cli: true})
	// Every part of the record of a few events (every byte of every event
	// with -reliability.exhaustive): version, kind, checksum, time, payload;
	// truncated, extended; a middle event deleted.
	structural := []uint64{1, firstOf(f.events, eventlog.KindStepStarted), firstOf(f.events, eventlog.KindResourceCaptured)}
	if *exhaustiveFlag {
		structural = structural[:0]
		for _, ev := range f.events {
			structural = append(structural, ev.Seq)
		}
	}
	for _, seq := range structural {
		rec := readValue(t, f.logDir(), eventKey(f.exec, seq))
		dmgs := []damage{truncateTo(0), truncateTo(13), truncateTo(len(rec) - 1), extend}
		positions := []int{0, 1, 2, 5, 6, 13, 14, len(rec) / 2, len(rec) - 1}
		if *exhaustiveFlag {
			positions = positions[:0]
			for pos := range rec {
				positions = append(positions, pos)
			}
		}
		for _, pos := range positions {
			dmgs = append(dmgs, flipBit(pos, uint(pos%8)))
		}
		for i, d := range dmgs {
			cases = append(cases, corruptCase{name: fmt.Sprintf("seq %d %s", seq, d.name),
				key: eventKey(f.exec, seq), dmg: d, exec: f.exec, seq: seq,
				cli: (seq == 1 && i == 4) || (seq == structural[1] && i == 11)})
		}
	}
	cases = append(cases, corruptCase{name: "seq 5 deleted", key: eventKey(f.exec, 5), dmg: deleteKey,
		exec: f.exec, seq: 5, cli: true})
	// Headers: the error names the execution.
	cases = append(cases,
		corruptCase{name: "header of the execution", key: headerKey(f.exec), dmg: flipBit(7, 1), exec: f.exec, cli: true},
		corruptCase{name: "header of the fork", key: headerKey(f.fork), dmg: truncateTo(4), exec: f.fork})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			copyTree(t, f.logDir(), filepath.Join(dir, "log"))
			rewriteValue(t, filepath.Join(dir, "log"), c.key, c.dmg.fn)
			f.checkCorruptEvent(t, dir, c)
			if c.cli {
				f.checkCLI(t, dir, c)
			}
		})
	}
}

func firstOf(events []eventlog.Event, kind eventlog.Kind) uint64 {
	for _, ev := range events {
		if ev.Kind() == kind {
			return ev.Seq
		}
	}
	panic("no " + kind.String())
}

// wantCorruption checks that err names c's execution and seq and wraps
// eventlog.ErrCorrupt.
func wantCorruption(t *testing.T, what string, err error, c corruptCase) {
	t.Helper()
	var ce *eventlog.CorruptionError
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case !errors.Is(err, eventlog.ErrCorrupt) || !errors.As(err, &ce):
		t.Errorf("%s: %v is not a corruption error", what, err)
	case ce.Execution != c.exec || ce.Seq != c.seq:
		t.Errorf("%s: %v names execution %s seq %d, want %s seq %d", what, err, ce.Execution, ce.Seq, c.exec, c.seq)
	case !strings.Contains(err.Error(), c.exec.String()) || (c.seq > 0 && !strings.Contains(err.Error(), fmt.Sprintf("seq %d", c.seq))):
		t.Errorf("%s: message %q does not name execution %s seq %d", what, err, c.exec, c.seq)
	}
}

// checkCorruptEvent reads everything that depends on the damaged record.
func (f *dataFolder) checkCorruptEvent(t *testing.T, dir string, c corruptCase) {
	ctx := context.Background()
	store, err := pebblestore.Open(filepath.Join(dir, "log"), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k := f.kernel(t, store)
	type reader struct {
		id     eventlog.ID
		prefix uint64 // events before the damaged one in this lineage
		hurt   bool   // the lineage holds the damaged record
	}
	readers := []reader{
		{id: f.exec, prefix: c.seq - 1, hurt: c.exec == f.exec},
		{id: f.fork, prefix: c.seq - 1, hurt: c.exec == f.fork || c.seq <= f.forkAt},
	}
	if c.seq == 0 { // a header: every read of the execution (and of its forks) fails first
		readers[0].hurt = c.exec == f.exec
		readers[1].hurt = true
		readers[0].prefix, readers[1].prefix = 0, 0
	}
	for _, r := range readers {
		var n uint64
		var rerr error
		for ev, err := range store.Events(ctx, r.id, 1) {
			if err != nil {
				rerr = err
				break
			}
			if ev.Seq != n+1 {
				t.Fatalf("lineage of %s: seq %d after %d: an event was skipped", r.id, ev.Seq, n)
			}
			n++
		}
		if !r.hurt {
			if rerr != nil {
				t.Errorf("lineage of %s does not hold the damaged record, yet: %v", r.id, rerr)
			}
			continue
		}
		wantCorruption(t, fmt.Sprintf("events of %s", r.id), rerr, c)
		if n != r.prefix {
			t.Errorf("events of %s: %d events before the error, want %d", r.id, n, r.prefix)
		}
		_, err := k.Run(ctx, r.id)
		wantCorruption(t, fmt.Sprintf("run of %s", r.id), err, c)
	}
	// Nothing was written by the failed runs.
	for _, r := range readers {
		if c.seq == 0 {
			break
		}
		head, err := store.Head(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(len(f.events))
		if r.id == f.fork {
			want = f.forkAt + 1
		}
		if head != want && !(c.dmg.name == deleteKey.name && head == want-1) {
			t.Errorf("head of %s is %d after the failed run, want %d", r.id, head, want)
		}
	}
}

// TestCorruptIndex: a damaged checkpoint-index entry is an error naming the
// execution and seq for coverage and forks that need it (DESIGN §3, §5).
func TestCorruptIndex(t *testing.T) {
	f := newDataFolder(t)
	seq := firstOf(f.events, eventlog.KindResourceCaptured)
	c := corruptCase{key: indexKey(f.exec, "workspace", seq), exec: f.exec, seq: seq}
	for _, d := range []damage{flipBit(0, 0), flipBit(2, 5), flipBit(9, 2), truncateTo(3), extend} {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "data")
			copyTree(t, f.logDir(), filepath.Join(dir, "log"))
			rewriteValue(t, filepath.Join(dir, "log"), c.key, d.fn)
			store, err := pebblestore.Open(filepath.Join(dir, "log"), pebblestore.WithoutSync())
			if err != nil {
				t.Fatal(err)
			}
			k := f.kernel(t, store)
			_, err = k.Coverage(ctx, f.exec, seq)
			wantCorruption(t, "coverage", err, c)
			before := len(decodeAll(t, store))
			_, err = k.Fork(ctx, f.exec, seq)
			wantCorruption(t, "fork", err, c)
			if after := len(decodeAll(t, store)); after != before {
				t.Errorf("a failed fork created an execution (%d → %d)", before, after)
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			if c := f.cliRun(t, dir, "coverage", f.exec.String(), strconv.FormatUint(seq, 10)); c.code == 0 ||
				!strings.Contains(c.stderr, f.exec.String()) || !strings.Contains(c.stderr, fmt.Sprintf("seq %d", seq)) {
				t.Errorf("forkline coverage: exit %d, stderr %q; want an error naming %s seq %d", c.code, c.stderr, f.exec, seq)
			}
		})
	}
}

// checkCLI asks the forkline command to read the damaged lineages: it fails
// with a one-line error naming the execution and seq, as the library does.
func (f *dataFolder) checkCLI(t *testing.T, dir string, c corruptCase) {
	t.Helper()
	ids := []eventlog.ID{f.fork}
	if c.exec == f.exec {
		ids = append(ids, f.exec)
	}
	for _, id := range ids {
		for _, cmd := range [][]string{{"events", id.String()}, {"run", id.String()}} {
			if cmd[0] == "run" && id != f.fork {
				continue // run only the fork: its agent is the command's own coder
			}
			if c.seq == 0 && c.exec == f.fork && id != f.fork {
				continue
			}
			if c.exec == f.exec && c.seq > f.forkAt && id == f.fork {
				continue // the fork's lineage does not hold the record
			}
			r := f.cliRun(t, dir, cmd...)
			want := []string{c.exec.String()}
			if c.seq > 0 {
				want = append(want, fmt.Sprintf("seq %d", c.seq), "corrupt")
			}
			ok := r.code == 1 && strings.Count(strings.TrimSpace(r.stderr), "\n") == 0
			for _, w := range want {
				ok = ok && strings.Contains(r.stderr, w)
			}
			if !ok {
				t.Errorf("forkline %s: exit %d, stderr %q; want exit 1 and one line naming %v", strings.Join(cmd, " "), r.code, r.stderr, want)
			}
		}
	}
}

// cliResult is what the forkline command did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cli is the forkline command, built once per test binary.
var cli = struct {
	once  sync.Once
	built chan struct{} // closed when the build is over
	cmd   *exec.Cmd     // the go build process
	dir   string
	bin   string
	err   error
}{built: make(chan struct{})}

// startForklineBuild starts building cmd/forkline with go build -o, once.
func startForklineBuild() {
	cli.once.Do(func() {
		fail := func(err error) {
			cli.err = err
			close(cli.built)
		}
		dir, err := os.MkdirTemp("", "forkline-cli-")
		if err != nil {
			fail(err)
			return
		}
		cli.dir = dir
		goTool, err := exec.LookPath("go")
		if err != nil {
			fail(err)
			return
		}
		bin := filepath.Join(dir, "forkline")
		var out bytes.Buffer
		cli.cmd = exec.Command(goTool, "build", "-o", bin, "github.com/forkline/forkline/cmd/forkline")
		cli.cmd.Stdout, cli.cmd.Stderr = &out, &out
		if err := cli.cmd.Start(); err != nil {
			fail(err)
			return
		}
		go func() {
			if err := cli.cmd.Wait(); err != nil {
				cli.err = fmt.Errorf("%v\n%s", err, out.String())
			} else {
				cli.bin = bin
			}
			close(cli.built)
		}()
	})
}

// stopForklineBuild ends the build if it still runs and removes the
// command.
func stopForklineBuild() {
	if cli.cmd == nil && cli.dir == "" {
		return
	}
	select {
	case <-cli.built:
	default:
		if cli.cmd != nil && cli.cmd.Process != nil {
			_ = cli.cmd.Process.Kill()
		}
		<-cli.built
	}
	_ = os.RemoveAll(cli.dir)
}

// forklineCommand returns the built forkline command, or skips the test if
// cmd/forkline does not build (yet).
func forklineCommand(t *testing.T) string {
	t.Helper()
	startForklineBuild()
	<-cli.built
	if cli.err != nil {
		t.Skipf("cmd/forkline does not build yet: %v", cli.err)
	}
	return cli.bin
}

func (f *dataFolder) cliRun(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	bin := forklineCommand(t)
	cmd := exec.Command(bin, append([]string{"--dir", dir}, args...)...)
	cmd.Env = append(os.Environ(), "LLM_MODEL=") // the command's own scripted model
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return cliResult{0, stdout.String(), stderr.String()}
	case errors.As(err, &exit) && exit.Exited():
		return cliResult{exit.ExitCode(), stdout.String(), stderr.String()}
	}
	t.Fatalf("forkline %v: %v\n%s", args, err, stderr.String())
	return cliResult{}
}

// TestCorruptCheckpoint damages the blobs and manifest of a dirfs checkpoint
// a fork selects: Verify and Create name the ref and the path, a fork that
// restores it fails with checkpoint_unavailable naming them, and so does the
// forkline command — never a workspace with wrong content (DESIGN §5).
func TestCorruptCheckpoint(t *testing.T) {
	f := newDataFolder(t)
	ctx := context.Background()
	var ref string
	var at uint64
	for _, ev := range f.events {
		if p, ok := ev.Data.(*eventlog.ResourceCaptured); ok && p.Reason == eventlog.CaptureSteps {
			ref, at = p.Ref, ev.Seq
		}
	}
	if ref == "" {
		t.Fatal("no steps capture")
	}
	manifest := filepath.Join(f.storeDir(), "manifests", ref)
	path, blob := blobOf(t, f.storeDir(), manifest, "go.mod")
	drv := dirfs.New(dirfs.Config{Store: f.storeDir(), NoSync: true})

	for _, c := range []struct {
		name     string
		file     string
		harm     func(v []byte) []byte // nil result: remove the file
		withPath bool                  // the error names the file's path
	}{
		{"blob flipped byte", blob, func(v []byte) []byte { v[len(v)/2] ^= 0x20; return v }, true},
		{"blob truncated", blob, func(v []byte) []byte { return v[:len(v)-1] }, true},
		{"blob missing", blob, func([]byte) []byte { return nil }, true},
		{"manifest flipped byte", manifest, func(v []byte) []byte { v[len(v)-4] ^= 0x01; return v }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, c.file, c.harm(bytes.Clone(orig)))
			defer writeFile(t, c.file, orig)
			names := func(what string, err error) {
				t.Helper()
				switch {
				case err == nil:
					t.Errorf("%s: no error", what)
				case !strings.Contains(err.Error(), ref):
					t.Errorf("%s: %q does not name ref %s", what, err, ref)
				case c.withPath && !strings.Contains(err.Error(), strconv.Quote(path)):
					t.Errorf("%s: %q does not name path %q", what, err, path)
				}
			}
			err = drv.Verify(ctx, ref)
			names("verify", err)
			if !errors.Is(err, dirfs.ErrCorrupt) {
				t.Errorf("verify: %v is not dirfs.ErrCorrupt", err)
			}
			wsBefore := entries(t, filepath.Join(f.storeDir(), "workspaces"))
			_, _, err = drv.Create(ctx, ref)
			names("create", err)
			if !errors.Is(err, driver.ErrCheckpointUnavailable) || !errors.Is(err, dirfs.ErrCorrupt) {
				t.Errorf("create: %v is not ErrCheckpointUnavailable and ErrCorrupt", err)
			}
			if wsAfter := entries(t, filepath.Join(f.storeDir(), "workspaces")); wsAfter != wsBefore {
				t.Errorf("a failed restore left a workspace behind (%d → %d entries)", wsBefore, wsAfter)
			}

			store, err := pebblestore.Open(f.logDir(), pebblestore.WithoutSync())
			if err != nil {
				t.Fatal(err)
			}
			k := f.kernel(t, store)
			fid, err := k.Fork(ctx, f.exec, at)
			if err != nil {
				t.Fatal(err)
			}
			cliFork, err := k.Fork(ctx, f.exec, at)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second Run returns the recorded failure
				_, err = k.Run(ctx, fid)
				var ee *sdk.ExecutionError
				if !errors.As(err, &ee) || ee.Code != eventlog.FailCheckpointUnavailable || !errors.Is(err, driver.ErrCheckpointUnavailable) {
					t.Errorf("run of a fork restoring the damaged checkpoint: %v, want checkpoint_unavailable", err)
				}
				names("run of the fork", err)
			}
			evs := lineage(t, store, fid)
			if last, ok := evs[len(evs)-1].Data.(*eventlog.ExecutionFailed); !ok || last.Code != eventlog.FailCheckpointUnavailable {
				t.Errorf("the fork ends with %s, want execution.failed{checkpoint_unavailable}", evs[len(evs)-1].Kind())
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			r := f.cliRun(t, f.dir, "run", cliFork.String())
			if r.code != 1 || !strings.Contains(r.stderr, ref) || (c.withPath && !strings.Contains(r.stderr, path)) {
				t.Errorf("forkline run of the fork: exit %d, stderr %q; want exit 1 naming ref %s and path %q", r.code, r.stderr, ref, path)
			}
		})
	}
}

// blobOf returns the path of name's blob in the checkpoint of manifest,
// read from the manifest's text (driver/dirfs/manifest.go):
// f <mode> <size> <sha256> "<path>".
func blobOf(t *testing.T, store, manifest, name string) (string, string) {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "f" && f[4] == strconv.Quote(name) {
			return name, filepath.Join(store, "blobs", f[3][:2], f[3])
		}
	}
	t.Fatalf("%s has no file %s", manifest, name)
	return "", ""
}

// writeFile replaces the read-only file p with data, or removes it for nil.
func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if data == nil {
		return
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}
