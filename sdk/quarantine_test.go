package sdk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
	"github.com/jackc/pgx/v5"
)

// damagedForks runs a parent "double" execution to completion, forks it
// four times at seq 4 (after its step), and returns the parent and forks.
func damagedForks(t *testing.T, log eventlog.IndexedLog) (eventlog.ID, []eventlog.ID) {
	t.Helper()
	ctx := t.Context()
	k := newKernel(t, log, registerDouble)
	parent, err := k.Start(ctx, "double", 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, parent); err != nil {
		t.Fatal(err)
	}
	var forks []eventlog.ID
	for range 4 {
		f, err := log.Fork(ctx, parent, 4, &eventlog.ForkCreated{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		forks = append(forks, f)
	}
	return parent, forks
}

// testServeQuarantines: issue 30 item 6. Under Serve with two slots, four
// pending forks of a parent whose event 2 was deleted each fail with
// ErrCorrupt once and are quarantined: Info shows it with the error
// (naming the parent and seq 2), the Error line is logged once per fork,
// nothing is appended to them, and they are claimed at most once each (a
// probe's claim afterwards gets epoch 2 at most). A healthy execution
// started beside them completes promptly.
func testServeQuarantines(t *testing.T, log eventlog.IndexedLog, parent eventlog.ID, forks []eventlog.ID) {
	ctx := t.Context()
	var logs syncBuffer
	k := newKernel(t, log, registerDouble, sdk.WithLogger(textLogger(&logs)))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.Concurrency(2), sdk.PollEvery(5*time.Millisecond)) }()
	defer func() { stop(); <-served }()

	healthy, err := k.Start(ctx, "double", 21)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	res, err := k.Wait(wctx, healthy)
	cancel()
	if err != nil || string(res.Output) != "42" {
		t.Fatalf("the healthy execution beside four damaged ones: %+v, %v\n%s", res, err, logs.String())
	}
	for _, f := range forks {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			info, err := log.Info(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if info.Quarantined {
				if !strings.Contains(info.QuarantineError, parent.String()) || !strings.Contains(info.QuarantineError, "seq 2") {
					t.Fatalf("QuarantineError %q does not name %s seq 2", info.QuarantineError, parent)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fork %s not quarantined: %+v\n%s", f, info, logs.String())
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // sixty polls: time to claim them again, were they claimable
	stop()
	<-served
	served <- nil

	var leaser eventlog.Leaser
	if !eventlog.As(log, &leaser) {
		t.Fatal("the store has no leases")
	}
	for _, f := range forks {
		var own []string
		for ev, err := range log.Events(ctx, f, 5) {
			if err != nil {
				t.Fatal(err)
			}
			own = append(own, ev.Kind().String())
		}
		if fmt.Sprint(own) != "[fork.created]" {
			t.Errorf("fork %s's own events %v, want only fork.created", f, own)
		}
		l, err := leaser.Claim(ctx, f, "probe", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Epoch > 2 {
			t.Errorf("fork %s: the probe's claim has epoch %d: Serve claimed it %d times, want at most once", f, l.Epoch, l.Epoch-1)
		}
		if n := strings.Count(logs.String(), "level=ERROR msg=\"forkline: serve: the execution's history is damaged; quarantined"); n < 1 {
			t.Errorf("no Error line for the quarantine:\n%s", logs.String())
		}
		if n := strings.Count(logs.String(), "quarantined: no Serve runs it until `forkline unquarantine` lifts it (or delete it, or fork it before the damage)\" execution="+f.String()); n != 1 {
			t.Errorf("fork %s: the quarantine logged %d times, want once:\n%s", f, n, logs.String())
		}
	}
}

// TestServeQuarantinesDamagedPostgres: the event row deleted with SQL.
func TestServeQuarantinesDamagedPostgres(t *testing.T) {
	url, schema := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	parent, forks := damagedForks(t, s)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `DELETE FROM `+schema+`.events WHERE execution = $1 AND seq = 2`, parent[:]); err != nil {
		t.Fatal(err)
	}
	testServeQuarantines(t, s, parent, forks)
}

// TestServeQuarantinesDamagedPebble: the event key deleted in the log's
// files between two opens.
func TestServeQuarantinesDamagedPebble(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	parent, forks := damagedForks(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deletePebbleEvent(t, dir, parent, 2)
	s, err = pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	testServeQuarantines(t, s, parent, forks)
}

// deletePebbleEvent deletes event seq of id from the closed Pebble log in
// dir, behind pebblestore's back.
func deletePebbleEvent(t *testing.T, dir string, id eventlog.ID, seq uint64) {
	t.Helper()
	// Pebble itself changes the tables behind pebblestore's back: drop
	// pebblestore's clean-close record, as its own Open for writing does,
	// or the next Open reports the MANIFEST as damaged.
	if err := os.Remove(filepath.Join(dir, "FORKLINE-CLOSED")); err != nil {
		t.Fatal(err)
	}
	raw, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(binary.BigEndian.AppendUint64(append([]byte{'e'}, id[:]...), seq), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestForkVerifyPrefix: Fork reads no record of the prefix (DESIGN §5),
// so a fork of a damaged prefix is made, and its run fails with
// ErrCorrupt naming the damaged execution and seq, appending nothing;
// with sdk.VerifyPrefix the fork is refused with that error and nothing
// is written; a healthy prefix verifies and forks.
func TestForkVerifyPrefix(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	k := newKernel(t, s, registerDouble)
	var ids [2]eventlog.ID
	for i := range ids {
		if ids[i], err = k.Start(ctx, "double", 5+i); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	damaged, healthy := ids[0], ids[1]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deletePebbleEvent(t, dir, damaged, 2)
	if s, err = pebblestore.Open(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	k = newKernel(t, s, registerDouble)
	count := func() int {
		n := 0
		for _, err := range s.List(ctx, eventlog.Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	wantDamage := func(what string, err error) {
		t.Helper()
		var ce *eventlog.CorruptionError
		if !errors.Is(err, eventlog.ErrCorrupt) || !errors.As(err, &ce) || ce.Execution != damaged || ce.Seq != 2 {
			t.Fatalf("%s = %v; want ErrCorrupt naming %s seq 2", what, err, damaged)
		}
	}
	before := count()
	_, err = k.Fork(ctx, damaged, 4, sdk.VerifyPrefix())
	wantDamage("Fork(VerifyPrefix)", err)
	if n := count(); n != before {
		t.Fatalf("%d executions after the refused fork, want %d", n, before)
	}
	f, err := k.Fork(ctx, damaged, 4)
	if err != nil {
		t.Fatalf("Fork without VerifyPrefix: %v (it reads no record of the prefix)", err)
	}
	_, err = k.Run(ctx, f)
	wantDamage("Run(fork of the damaged prefix)", err)
	if info, err := s.Info(ctx, f); err != nil || info.Head != 5 {
		t.Fatalf("the fork's head after its failed run = %d (%v), want 5: fork.created alone", info.Head, err)
	}
	g, err := k.Fork(ctx, healthy, 4, sdk.VerifyPrefix())
	if err != nil {
		t.Fatalf("Fork(healthy, VerifyPrefix): %v", err)
	}
	if res, err := k.Run(ctx, g); err != nil || string(res.Output) != "12" {
		t.Fatalf("the healthy fork ran to %s, %v; want 12", res.Output, err)
	}
}
