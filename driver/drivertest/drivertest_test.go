package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/forkline/forkline/driver"
)

// memStore is the state shared by the in-memory drivers: resources by
// binding ID and checkpoints by ref.
type memStore struct {
	mu          sync.Mutex
	next        int
	resources   map[string]*memResource
	checkpoints map[string]map[string]string
	shared      map[string]*memResource // per ref, for the shared-restore bug
}

type memResource struct {
	mu sync.Mutex
	kv map[string]string
}

// memHandle is the handle of the in-memory driver.
type memHandle struct {
	id     string
	r      *memResource
	broken bool // set by the break-handle bug after a checkpoint
}

// memBinding is the binding of the in-memory driver.
type memBinding struct {
	ID string `json:"id"`
}

// Bugs the memory driver can be given, each breaking one part of the
// contract.
const (
	bugNone              = ""
	bugEmptyID           = "empty-id"
	bugUnstableID        = "unstable-id"
	bugCredentials       = "credentials"
	bugNondeterministic  = "nondeterministic-initial"
	bugAliasCheckpoint   = "alias-checkpoint"
	bugLossyRestore      = "lossy-restore"
	bugBreakHandle       = "break-handle"
	bugOpenCopies        = "open-copies"
	bugSharedRestore     = "shared-restore"
	bugPlainMissingError = "plain-missing-error"
	bugAcceptsGarbage    = "accepts-garbage"
	bugDeleteKeeps       = "delete-keeps"
	bugSameBinding       = "same-binding"
)

// memDriver is a small, correct in-memory driver — unless bug says which
// part of the contract to break.
type memDriver struct {
	s     *memStore
	bug   string
	calls int
}

var _ driver.Driver[*memHandle, memBinding] = (*memDriver)(nil)

func newMem(bug string) *memDriver {
	return &memDriver{bug: bug, s: &memStore{
		resources:   map[string]*memResource{},
		checkpoints: map[string]map[string]string{},
		shared:      map[string]*memResource{},
	}}
}

func (d *memDriver) DriverID() string {
	switch d.bug {
	case bugEmptyID:
		return ""
	case bugUnstableID:
		d.calls++
		return "test.mem.v" + strconv.Itoa(d.calls)
	}
	return "test.mem.v1"
}

func (d *memDriver) Configuration() any {
	if d.bug == bugCredentials {
		return map[string]any{"region": "x", "upstream": map[string]string{"apiToken": "t0ps3cret"}}
	}
	return map[string]any{"region": "x"}
}

func (d *memDriver) Create(ctx context.Context, from string) (*memHandle, memBinding, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var kv map[string]string
	if from == "" {
		kv = map[string]string{"init": "1"}
		if d.bug == bugNondeterministic {
			kv["nonce"] = strconv.Itoa(d.s.next)
		}
	} else {
		cp, ok := d.s.checkpoints[from]
		if !ok {
			if d.bug == bugAcceptsGarbage {
				cp = map[string]string{}
			} else if d.bug == bugPlainMissingError {
				return nil, memBinding{}, errors.New("mem: no such checkpoint")
			} else {
				return nil, memBinding{}, fmt.Errorf("mem: checkpoint %q: %w", from, driver.ErrCheckpointUnavailable)
			}
		}
		if d.bug == bugSharedRestore {
			r, ok := d.s.shared[from]
			if !ok {
				r = &memResource{kv: maps.Clone(cp)}
				d.s.shared[from] = r
			}
			return d.addLocked(r)
		}
		kv = maps.Clone(cp)
		if d.bug == bugLossyRestore {
			for k := range kv {
				if k != "init" {
					delete(kv, k)
					break
				}
			}
		}
	}
	return d.addLocked(&memResource{kv: kv})
}

func (d *memDriver) addLocked(r *memResource) (*memHandle, memBinding, error) {
	d.s.next++
	id := "r" + strconv.Itoa(d.s.next)
	if d.bug == bugSameBinding {
		id = "r"
	}
	d.s.resources[id] = r
	return &memHandle{id: id, r: r}, memBinding{ID: id}, nil
}

func (d *memDriver) Open(ctx context.Context, b memBinding) (*memHandle, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	r, ok := d.s.resources[b.ID]
	if !ok {
		return nil, fmt.Errorf("mem: no resource %q", b.ID)
	}
	if d.bug == bugOpenCopies {
		r.mu.Lock()
		clone := &memResource{kv: maps.Clone(r.kv)}
		r.mu.Unlock()
		r = clone
	}
	return &memHandle{id: b.ID, r: r}, nil
}

func (d *memDriver) Checkpoint(ctx context.Context, h *memHandle) (string, error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	kv := h.r.kv
	if d.bug != bugAliasCheckpoint {
		kv = maps.Clone(kv)
	}
	d.s.next++
	ref := "cp" + strconv.Itoa(d.s.next)
	d.s.checkpoints[ref] = kv
	if d.bug == bugBreakHandle {
		h.broken = true
	}
	return ref, nil
}

func (d *memDriver) delete(ref string) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if d.bug != bugDeleteKeeps {
		delete(d.s.checkpoints, ref)
	}
}

func memHarness() Harness[*memHandle, memBinding] {
	return Harness[*memHandle, memBinding]{
		Mutate: func(t testing.TB, h *memHandle, step int) {
			t.Helper()
			if h.broken {
				t.Fatalf("handle %s is unusable", h.id)
			}
			h.r.mu.Lock()
			defer h.r.mu.Unlock()
			h.r.kv["k"+strconv.Itoa(step%3)] = strconv.Itoa(step)
			h.r.kv["last"] = strconv.Itoa(step)
		},
		Snapshot: func(t testing.TB, h *memHandle) any {
			h.r.mu.Lock()
			defer h.r.mu.Unlock()
			return maps.Clone(h.r.kv)
		},
		DeleteCheckpoint: func(t testing.TB, d driver.Driver[*memHandle, memBinding], ref string) {
			d.(*memDriver).delete(ref)
		},
	}
}

func TestRunMemoryDriver(t *testing.T) {
	Run(t, func(t testing.TB) driver.Driver[*memHandle, memBinding] { return newMem(bugNone) }, memHarness())
}

// fakeTB records failures instead of failing the real test, so that a check
// run against a broken driver can be observed to fail. Everything else goes
// to the real test.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
}

func (f *fakeTB) fail(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, msg)
}

func (f *fakeTB) Error(args ...any)                 { f.fail(fmt.Sprint(args...)) }
func (f *fakeTB) Errorf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }
func (f *fakeTB) Fail()                             { f.fail("Fail") }
func (f *fakeTB) FailNow()                          { f.fail("FailNow"); runtime.Goexit() }
func (f *fakeTB) Fatal(args ...any)                 { f.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeTB) SkipNow()             { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Skip(args ...any)     { f.SkipNow() }
func (f *fakeTB) Skipf(string, ...any) { f.SkipNow() }
func (f *fakeTB) Skipped() bool        { return f.skipped }
func (f *fakeTB) Failed() bool         { f.mu.Lock(); defer f.mu.Unlock(); return f.failed }
func (f *fakeTB) Helper()              {}
func (f *fakeTB) Log(args ...any)      {}
func (f *fakeTB) Logf(string, ...any)  {}

// runCheck runs the named check against newDriver on a fakeTB and returns
// it once the check has returned or stopped.
func runCheck[H, B any](t *testing.T, name string, newDriver func(testing.TB) driver.Driver[H, B], h Harness[H, B]) *fakeTB {
	t.Helper()
	k := &kit[H, B]{newDriver: newDriver, h: h}
	for _, c := range checks[H, B]() {
		if c.name != name {
			continue
		}
		f := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.run(f, k)
		}()
		<-done
		return f
	}
	t.Fatalf("no check %q", name)
	return nil
}

// TestChecksCanFail runs each check against a driver with a bug that breaks
// what the check is about, and requires the check to fail; and against the
// correct driver, and requires it to pass.
func TestChecksCanFail(t *testing.T) {
	tests := []struct {
		check string
		bug   string
	}{
		{"DriverID", bugEmptyID},
		{"DriverID", bugUnstableID},
		{"Configuration", bugCredentials},
		{"CreateInitial", bugNondeterministic},
		{"CreateInitial", bugSameBinding},
		{"RestoreExact", bugLossyRestore},
		{"RefImmutable", bugAliasCheckpoint},
		{"HandleUsableAfterCheckpoint", bugBreakHandle},
		{"OpenSameResource", bugOpenCopies},
		{"IsolatedRestores", bugSharedRestore},
		{"MissingRef", bugPlainMissingError},
		{"MissingRef", bugAcceptsGarbage},
		{"DeletedRef", bugDeleteKeeps},
	}
	for _, tt := range tests {
		t.Run(tt.check+"/"+tt.bug, func(t *testing.T) {
			broken := runCheck(t, tt.check, func(testing.TB) driver.Driver[*memHandle, memBinding] { return newMem(tt.bug) }, memHarness())
			if !broken.Failed() {
				t.Errorf("check %s passed against a driver with bug %q", tt.check, tt.bug)
			} else {
				t.Logf("failed as it should: %s", strings.Join(broken.msgs, "; "))
			}
			good := runCheck(t, tt.check, func(testing.TB) driver.Driver[*memHandle, memBinding] { return newMem(bugNone) }, memHarness())
			if good.Failed() || good.Skipped() {
				t.Errorf("check %s failed against the correct driver: %s", tt.check, strings.Join(good.msgs, "; "))
			}
		})
	}
}

// lossyBinding loses the resource's identity in JSON: its field is
// unexported.
type lossyBinding struct{ id string }

// lossyDriver wraps the memory driver with a binding that does not survive
// JSON.
type lossyDriver struct{ m *memDriver }

func (d lossyDriver) DriverID() string   { return d.m.DriverID() }
func (d lossyDriver) Configuration() any { return d.m.Configuration() }
func (d lossyDriver) Create(ctx context.Context, from string) (*memHandle, lossyBinding, error) {
	h, b, err := d.m.Create(ctx, from)
	return h, lossyBinding{b.ID}, err
}
func (d lossyDriver) Open(ctx context.Context, b lossyBinding) (*memHandle, error) {
	return d.m.Open(ctx, memBinding{ID: b.id})
}
func (d lossyDriver) Checkpoint(ctx context.Context, h *memHandle) (string, error) {
	return d.m.Checkpoint(ctx, h)
}

func TestBindingJSONCanFail(t *testing.T) {
	mh := memHarness()
	h := Harness[*memHandle, lossyBinding]{Mutate: mh.Mutate, Snapshot: mh.Snapshot}
	f := runCheck(t, "BindingJSON", func(testing.TB) driver.Driver[*memHandle, lossyBinding] { return lossyDriver{newMem(bugNone)} }, h)
	if !f.Failed() {
		t.Fatal("BindingJSON passed for a binding that loses its identity in JSON")
	}
}

// TestHarnessWithoutChangeFails: a harness whose Mutate changes nothing
// would let the immutability checks pass vacuously; the kit reports it.
func TestHarnessWithoutChangeFails(t *testing.T) {
	h := memHarness()
	h.Mutate = func(testing.TB, *memHandle, int) {}
	f := runCheck(t, "RefImmutable", func(testing.TB) driver.Driver[*memHandle, memBinding] { return newMem(bugNone) }, h)
	if !f.Failed() {
		t.Fatal("RefImmutable passed with a Mutate that changes nothing")
	}
}

func TestDeletedRefSkipsWithoutDelete(t *testing.T) {
	h := memHarness()
	h.DeleteCheckpoint = nil
	f := runCheck(t, "DeletedRef", func(testing.TB) driver.Driver[*memHandle, memBinding] { return newMem(bugNone) }, h)
	if !f.Skipped() || f.Failed() {
		t.Fatalf("DeletedRef without Harness.DeleteCheckpoint: skipped=%v failed=%v", f.Skipped(), f.Failed())
	}
}
