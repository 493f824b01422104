package pebblestore_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// walCrash appends n synced events to a new execution, then, past
// WALMarkEvery, one more (whose sync writes the side record), and copies
// the folder while the store is open: the image of a crash. It returns the
// image, what the log held, the write-ahead log being written, and the
// offset the side record holds.
func walCrash(t *testing.T, n int) (f folder, img logImage, wal string, synced int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	s := openDir(t, dir)
	a := create(t, s, "alpha")
	for i := range n {
		appendAll(t, s, a, dispatch(uint64(i+1)))
	}
	time.Sleep(pebblestore.WALMarkEvery + 10*time.Millisecond)
	appendAll(t, s, a, dispatch(uint64(n+1)))
	img = logImage{a: events(t, s, a, 1)}
	wal = newest(t, readFolder(t, dir), hasSuffix(".log"))
	off := waitMark(t, dir, wal)
	f = readFolder(t, dir)
	return f, img, wal, int(off)
}

// waitMark waits until dir's side record names wal at its whole size (the
// record is written shortly after the sync it records) and returns the
// offset.
func waitMark(t *testing.T, dir, wal string) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fi, serr := os.Stat(filepath.Join(dir, wal))
		log, off, ok, err := pebblestore.WALMark(dir)
		if serr == nil && err == nil && ok && fmt.Sprintf("%06d.log", log) == wal && off == uint64(fi.Size()) && off > 0 {
			return off
		}
		if time.Now().After(deadline) {
			t.Fatalf("side record = log %d, offset %d, %v, %v (%v); want %s at its size", log, off, ok, err, serr, wal)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWALLossDetected (issue 30 item 8): after a crash, a write-ahead log
// cut short inside the part its side record says was synced, or deleted,
// is reported — by a read-only Open and an Open for writing alike — as an
// error wrapping ErrCorrupt that names the log and says how to proceed,
// and neither changes a file. (Before, the log opened with fewer events,
// or none, without a word.) The intact image reads back every
// acknowledged event.
func TestWALLossDetected(t *testing.T) {
	f, img, wal, synced := walCrash(t, 150)
	d := filepath.Join(t.TempDir(), "log")
	f.write(t, d)
	got, err := readAll(d)
	if err != nil || !equalImages(img, got) {
		t.Fatalf("the intact crash image: %v\n%s", err, diff(img, got))
	}
	cases := map[string]func(string){
		"delete " + wal: removeFiles(func(n string) bool { return n == wal }),
	}
	for _, n := range []int{0, 100, synced / 2, synced - 1} {
		cases[fmt.Sprintf("truncate %s to %d bytes (synced to %d)", wal, n, synced)] = truncateAt(wal, n)
	}
	for label, damage := range cases {
		for _, mode := range []string{"read-only", "writable"} {
			d := filepath.Join(t.TempDir(), "log")
			f.write(t, d)
			damage(d)
			before := readFolder(t, d)
			var err error
			if mode == "read-only" {
				_, err = readAll(d)
			} else {
				var s *pebblestore.Store
				if s, err = pebblestore.Open(d); err == nil {
					_ = s.Close()
				}
			}
			if !errors.Is(err, eventlog.ErrCorrupt) || !strings.Contains(err.Error(), wal) || !strings.Contains(err.Error(), "AcceptWALLoss") {
				t.Errorf("%s, %s open: %v; want ErrCorrupt naming %s and AcceptWALLoss", label, mode, err, wal)
			}
			if diff := sameFolder(t, d, before); diff != "" {
				t.Errorf("%s, %s open: the folder changed: %s", label, mode, diff)
			}
		}
	}
}

// TestWALLossAccepted: AcceptWALLoss opens a log whose write-ahead log was
// cut short with what it holds (a prefix of what was written); a writable
// open with it starts a new side record, so the next plain Open succeeds.
func TestWALLossAccepted(t *testing.T) {
	f, img, wal, synced := walCrash(t, 150)
	d := filepath.Join(t.TempDir(), "log")
	f.write(t, d)
	truncateAt(wal, synced/2)(d)
	s, err := pebblestore.Open(d, pebblestore.ReadOnly(), pebblestore.AcceptWALLoss())
	if err != nil {
		t.Fatalf("ReadOnly, AcceptWALLoss: %v", err)
	}
	_ = s.Close()
	if _, err := pebblestore.Open(d, pebblestore.ReadOnly()); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("a read-only open with AcceptWALLoss changed the side record: the next open gives %v", err)
	}
	s, err = pebblestore.Open(d, pebblestore.AcceptWALLoss())
	if err != nil {
		t.Fatalf("AcceptWALLoss: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(d)
	if err != nil {
		t.Fatalf("the next plain open: %v", err)
	}
	for id, evs := range img {
		if n := len(got[id]); n >= len(evs) || !eventsEqual(evs[:n], got[id]) {
			t.Fatalf("after the loss, execution %s holds %d of %d events; want a shorter prefix", id, n, len(evs))
		}
	}
}

// TestWALMarkAfterFlush: a log whose data Pebble flushed may be deleted or
// reused; the side record never asks for it. Sessions that reopen the log
// (each flushes and retires the log before), and a crash right after a
// reopen, open without an error and read back everything.
func TestWALMarkAfterFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var a eventlog.ID
	for session := range 3 {
		s := openDir(t, dir)
		if session == 0 {
			a = create(t, s, "alpha")
		}
		for i := range 20 {
			appendAll(t, s, a, dispatch(uint64(100*session+i+1)))
		}
		time.Sleep(pebblestore.WALMarkEvery + 10*time.Millisecond)
		appendAll(t, s, a, dispatch(uint64(100*session+50)))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := openDir(t, dir)
	img := logImage{a: events(t, s, a, 1)}
	crash := readFolder(t, dir) // a crash right after the reopen
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(t.TempDir(), "log")
	crash.write(t, d)
	got, err := readAll(d)
	if err != nil || !equalImages(img, got) {
		t.Fatalf("a crash after a reopen: %v\n%s", err, diff(img, got))
	}
}

// TestWALMarkRetired: while a store runs, Pebble flushes the log the side
// record names and then deletes or reuses it; the record is rewritten
// first, so a crash after that opens without an error and reads back
// everything.
func TestWALMarkRetired(t *testing.T) {
	// The record is written once, then not again for a minute: only the
	// retirement of its log may change it.
	pebblestore.SetWALMarkEvery(t, time.Minute)
	dir := filepath.Join(t.TempDir(), "log")
	s := openDir(t, dir)
	a := create(t, s, "alpha")
	appendAll(t, s, a, dispatch(1))
	appendAll(t, s, a, dispatch(2))
	log, off, ok, err := pebblestore.WALMark(dir)
	name := fmt.Sprintf("%06d.log", log)
	if _, serr := os.Stat(filepath.Join(dir, name)); err != nil || !ok || off == 0 || serr != nil {
		t.Fatalf("side record = log %d, offset %d, %v, %v (%v); want a log of the folder", log, off, ok, err, serr)
	}
	wal := filepath.Join(dir, name)
	deadline := time.Now().Add(10 * time.Second)
	for i := uint64(3); ; i++ {
		if _, err := os.Stat(wal); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pebble kept %s through %d flushes", wal, i)
		}
		appendAll(t, s, a, dispatch(i))
		if err := pebblestore.DB(s).Flush(); err != nil {
			t.Fatal(err)
		}
	}
	img := logImage{a: events(t, s, a, 1)}
	d := filepath.Join(t.TempDir(), "log")
	readFolder(t, dir).write(t, d)
	got, err := readAll(d)
	if err != nil || !equalImages(img, got) {
		t.Fatalf("a crash after %s was retired: %v\n%s", wal, err, diff(img, got))
	}
}

// TestWALMarkTrailing: appends synced while the side record's writer waits
// out its interval are recorded when the wait ends, with no later append
// to wake it: what can vanish unreported is bounded in time, not by the
// next append.
func TestWALMarkTrailing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	s := openDir(t, dir)
	a := create(t, s, "alpha")
	for i := range 3 {
		appendAll(t, s, a, dispatch(uint64(i+1))) // within one interval
	}
	start := time.Now()
	waitMark(t, dir, newest(t, readFolder(t, dir), hasSuffix(".log")))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the last append was recorded %v after it", d)
	}
}
