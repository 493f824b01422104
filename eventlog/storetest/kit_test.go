package storetest_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/storetest"
)

// recorder is a storetest.T that records failures instead of failing the
// test that runs it, so that a test can assert that a check fails.
type recorder struct {
	ctx context.Context
	mu  sync.Mutex
	msg []string
	bad bool
}

func (r *recorder) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = true
	r.msg = append(r.msg, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper()             {}
func (r *recorder) Name() string        { return "recorder" }
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Log(...any)          {}
func (r *recorder) Skipf(format string, args ...any) {
	r.fail("skipped: "+format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any)                  { r.Skipf("%s", fmt.Sprint(args...)) }
func (r *recorder) SkipNow()                          { r.Skipf("skipped") }
func (r *recorder) Errorf(format string, args ...any) { r.fail(format, args...) }
func (r *recorder) Error(args ...any)                 { r.fail("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.fail(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recorder) FailNow()                          { r.fail("FailNow"); runtime.Goexit() }
func (r *recorder) Fail()                             { r.fail("Fail") }
func (r *recorder) Context() context.Context          { return r.ctx }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// record runs check with a recorder and returns what it reported.
func record(t *testing.T, check func(storetest.T)) (bool, string) {
	r := &recorder{ctx: t.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.Failed(), strings.Join(r.msg, "\n")
}

// lostUpdates breaks the rule of expectedHead: it appends at whatever the
// head is, so racing writers overwrite nothing but all "win".
type lostUpdates struct{ *pebblestore.Store }

func (s lostUpdates) Append(ctx context.Context, id eventlog.ID, _ uint64, events ...eventlog.Event) (uint64, error) {
	for {
		head, err := s.Store.Head(ctx, id)
		if err != nil {
			return 0, err
		}
		evs := make([]eventlog.Event, len(events))
		for i, ev := range events {
			ev.Seq = 0
			evs[i] = ev
		}
		n, err := s.Store.Append(ctx, id, head, evs...)
		if err == nil || !strings.Contains(err.Error(), "head is") {
			return n, err
		}
	}
}

// staleIndex answers ResourceStates one event late.
type staleIndex struct{ *pebblestore.Store }

func (s staleIndex) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	return s.Store.ResourceStates(ctx, id, max(1, at-1))
}

// sticky keeps working after Close.
type sticky struct{ *pebblestore.Store }

func (s sticky) Close() error { return nil }

func open(t *testing.T) *pebblestore.Store {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestKitCatchesBrokenStores: each check passes on pebblestore and fails
// on a wrapper of it that breaks one rule.
func TestKitCatchesBrokenStores(t *testing.T) {
	// A failing rapid check would save a fail file under testdata.
	if f := flag.Lookup("rapid.nofailfile"); f != nil {
		old := f.Value.String()
		_ = f.Value.Set("true")
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
	cases := []struct {
		name   string
		check  func(storetest.T, eventlog.IndexedLog)
		broken func(*pebblestore.Store) eventlog.IndexedLog
		want   string // in the report
		clean  bool   // also run the check on pebblestore itself (its own tests run TestLineage)
	}{
		{"Concurrency", storetest.TestConcurrency, func(s *pebblestore.Store) eventlog.IndexedLog { return lostUpdates{s} }, "want exactly 1", true},
		{"Lineage", storetest.TestLineage, func(s *pebblestore.Store) eventlog.IndexedLog { return staleIndex{s} }, "ResourceStates", false},
		{"Close", storetest.TestClose, func(s *pebblestore.Store) eventlog.IndexedLog { return sticky{s} }, "want ErrClosed", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if failed, msg := record(t, func(r storetest.T) { c.check(r, open(t)) }); c.clean && failed {
				t.Fatalf("the check fails on pebblestore:\n%s", msg)
			}
			failed, msg := record(t, func(r storetest.T) { c.check(r, c.broken(open(t))) })
			if !failed {
				t.Fatalf("the check passes on a broken store")
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("the check failed, but its report does not say %q:\n%s", c.want, msg)
			}
		})
	}
}
