package drivertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/google/go-cmp/cmp"
)

// Harness adapts a driver's handle for the kit: the kit cannot know what a
// handle's state is, so the driver author says how to change it and how to
// observe it.
type Harness[H, B any] struct {
	// Mutate changes the resource through h. step is 1, 2, 3, … within one
	// resource's lineage; the state after Mutate(h, s) must differ from the
	// state before it. Required.
	Mutate func(t testing.TB, h H, step int)
	// Snapshot returns the resource's observable state through h, as a value
	// that go-cmp compares (with CmpOptions). Required.
	Snapshot func(t testing.TB, h H) any
	// DeleteCheckpoint removes ref from d's store, after which d.Create(ref)
	// must report driver.ErrCheckpointUnavailable. Optional: when nil, the
	// DeletedRef check is skipped.
	DeleteCheckpoint func(t testing.TB, d driver.Driver[H, B], ref string)
	// Close releases a handle the kit made, at the end of its check.
	// Optional.
	Close func(h H)
	// CmpOptions are passed to go-cmp when snapshots are compared.
	CmpOptions []cmp.Option
	// MissingRefs are refs that name no checkpoint of a fresh driver; Create
	// must fail on each with driver.ErrCheckpointUnavailable. Default
	// DefaultMissingRefs.
	MissingRefs []string
}

// DefaultMissingRefs are the refs the MissingRef check tries by default:
// well-formed ones that were never made and malformed ones (paths, traversal,
// control characters).
var DefaultMissingRefs = []string{
	strings.Repeat("0", 64),
	strings.Repeat("f", 64),
	"missing",
	"../../../../etc/passwd",
	"/etc/passwd",
	"a/b",
	"..",
	" ",
	"x\x00y",
}

// Run checks the driver that newDriver returns against the contract of
// [driver.Driver], one subtest per check (see the package documentation).
// newDriver is called once or more per check and must return a driver with
// a fresh, empty store.
func Run[H, B any](t *testing.T, newDriver func(t testing.TB) driver.Driver[H, B], h Harness[H, B]) {
	t.Helper()
	if newDriver == nil || h.Mutate == nil || h.Snapshot == nil {
		t.Fatal("drivertest: newDriver, Harness.Mutate and Harness.Snapshot are required")
	}
	k := &kit[H, B]{newDriver: newDriver, h: h}
	for _, c := range checks[H, B]() {
		t.Run(c.name, func(t *testing.T) { c.run(t, k) })
	}
}

// check is one named conformance check.
type check[H, B any] struct {
	name string
	run  func(t testing.TB, k *kit[H, B])
}

// checks lists the conformance checks in the order Run runs them.
func checks[H, B any]() []check[H, B] {
	return []check[H, B]{
		{"DriverID", checkDriverID[H, B]},
		{"Configuration", checkConfiguration[H, B]},
		{"CreateInitial", checkCreateInitial[H, B]},
		{"RestoreExact", checkRestoreExact[H, B]},
		{"RefImmutable", checkRefImmutable[H, B]},
		{"HandleUsableAfterCheckpoint", checkHandleUsable[H, B]},
		{"OpenSameResource", checkOpenSameResource[H, B]},
		{"BindingJSON", checkBindingJSON[H, B]},
		{"IsolatedRestores", checkIsolatedRestores[H, B]},
		{"MissingRef", checkMissingRef[H, B]},
		{"DeletedRef", checkDeletedRef[H, B]},
		{"Collector", checkCollector[H, B]},
	}
}

// kit carries what the checks share.
type kit[H, B any] struct {
	newDriver func(t testing.TB) driver.Driver[H, B]
	h         Harness[H, B]
}

func (k *kit[H, B]) driver(t testing.TB) driver.Driver[H, B] {
	t.Helper()
	d := k.newDriver(t)
	if isNil(d) {
		t.Fatal("newDriver returned nil")
	}
	return d
}

// create calls d.Create and fails the check on an error or a nil handle.
func (k *kit[H, B]) create(t testing.TB, d driver.Driver[H, B], from string) (H, B) {
	t.Helper()
	h, b, err := d.Create(t.Context(), from)
	if err != nil {
		t.Fatalf("Create(%q): %v", from, err)
	}
	if isNil(h) {
		t.Fatalf("Create(%q) returned a nil handle and no error", from)
	}
	k.closeLater(t, h)
	return h, b
}

// open calls d.Open and fails the check on an error or a nil handle.
func (k *kit[H, B]) open(t testing.TB, d driver.Driver[H, B], b B) H {
	t.Helper()
	h, err := d.Open(t.Context(), b)
	if err != nil {
		t.Fatalf("Open(%s): %v", bindingText(b), err)
	}
	if isNil(h) {
		t.Fatalf("Open(%s) returned a nil handle and no error", bindingText(b))
	}
	k.closeLater(t, h)
	return h
}

// checkpoint calls d.Checkpoint and fails the check on an error or an empty
// ref.
func (k *kit[H, B]) checkpoint(t testing.TB, d driver.Driver[H, B], h H) string {
	t.Helper()
	ref, err := d.Checkpoint(t.Context(), h)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if ref == "" {
		t.Fatal("Checkpoint returned an empty ref; \"\" means the initial environment")
	}
	return ref
}

func (k *kit[H, B]) closeLater(t testing.TB, h H) {
	if k.h.Close != nil {
		t.Cleanup(func() { k.h.Close(h) })
	}
}

func (k *kit[H, B]) mutate(t testing.TB, h H, step int) {
	t.Helper()
	k.h.Mutate(t, h, step)
}

func (k *kit[H, B]) snapshot(t testing.TB, h H) any {
	t.Helper()
	return k.h.Snapshot(t, h)
}

// diff compares two snapshots; a panic in go-cmp (unexported fields without
// an option) is reported as a failure of the harness.
func (k *kit[H, B]) diff(t testing.TB, want, got any) (d string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("comparing snapshots panicked (add Harness.CmpOptions?): %v", r)
		}
	}()
	return cmp.Diff(want, got, k.h.CmpOptions...)
}

// expectState fails the check when h's state is not want.
func (k *kit[H, B]) expectState(t testing.TB, h H, want any, format string, args ...any) {
	t.Helper()
	if d := k.diff(t, want, k.snapshot(t, h)); d != "" {
		t.Errorf("%s: state differs (-want +got):\n%s", fmt.Sprintf(format, args...), d)
	}
}

// mutateChanges mutates h and fails the check (as a broken harness) when the
// state did not change; it returns the new state.
func (k *kit[H, B]) mutateChanges(t testing.TB, h H, step int) any {
	t.Helper()
	before := k.snapshot(t, h)
	k.mutate(t, h, step)
	after := k.snapshot(t, h)
	if k.diff(t, before, after) == "" {
		t.Fatalf("Mutate(step %d) did not change the state: the harness must make every step visible to Snapshot", step)
	}
	return after
}

func checkDriverID[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	id := d.DriverID()
	if id == "" {
		t.Fatal("DriverID is empty")
	}
	if strings.TrimSpace(id) != id {
		t.Errorf("DriverID %q has surrounding space", id)
	}
	if again := d.DriverID(); again != id {
		t.Errorf("DriverID changed between calls: %q, then %q", id, again)
	}
	if other := k.driver(t).DriverID(); other != id {
		t.Errorf("DriverID differs between driver values: %q and %q", id, other)
	}
}

func checkConfiguration[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	enc, err := driver.EncodeConfiguration(d.Configuration())
	if err != nil {
		t.Fatalf("Configuration: %v", err)
	}
	if enc != nil && !json.Valid(enc) {
		t.Fatalf("Configuration encodes to invalid JSON %q", enc)
	}
	again, err := driver.EncodeConfiguration(d.Configuration())
	if err != nil {
		t.Fatalf("Configuration, second call: %v", err)
	}
	if !bytes.Equal(enc, again) {
		t.Errorf("Configuration changed between calls: %s, then %s", enc, again)
	}
	// Taking a checkpoint must not change it either: the kernel compares the
	// recorded configuration with the driver's on every dispatch.
	h, _ := k.create(t, d, "")
	k.checkpoint(t, d, h)
	after, err := driver.EncodeConfiguration(d.Configuration())
	if err != nil || !bytes.Equal(enc, after) {
		t.Errorf("Configuration changed after Create and Checkpoint: %s, then %s (err %v)", enc, after, err)
	}
}

func checkCreateInitial[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	a, ab := k.create(t, d, "")
	b, bb := k.create(t, d, "")
	initial := k.snapshot(t, a)
	k.expectState(t, b, initial, "a second initial resource")
	if bindingText(ab) == bindingText(bb) {
		t.Errorf("two resources have the same binding %s", bindingText(ab))
	}
	changed := k.mutateChanges(t, a, 1)
	k.expectState(t, b, initial, "an initial resource after another one changed")
	k.mutate(t, b, 1)
	k.expectState(t, a, changed, "an initial resource after another one changed")
}

func checkRestoreExact[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, _ := k.create(t, d, "")
	initial := k.snapshot(t, h)
	ref0 := k.checkpoint(t, d, h)
	r0, _ := k.create(t, d, ref0)
	k.expectState(t, r0, initial, "Create(checkpoint of the initial state)")

	k.mutate(t, h, 1)
	k.mutate(t, h, 2)
	want := k.snapshot(t, h)
	ref := k.checkpoint(t, d, h)
	if k.h.Close != nil {
		k.h.Close(h) // a checkpoint must not depend on its source handle
	}
	r, _ := k.create(t, d, ref)
	k.expectState(t, r, want, "Create(ref) after two changes")

	// A restored resource can itself be checkpointed and restored.
	k.mutate(t, r, 3)
	want3 := k.snapshot(t, r)
	ref3 := k.checkpoint(t, d, r)
	r3, _ := k.create(t, d, ref3)
	k.expectState(t, r3, want3, "Create(checkpoint of a restored resource)")
}

func checkRefImmutable[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, _ := k.create(t, d, "")
	k.mutate(t, h, 1)
	s1 := k.snapshot(t, h)
	ref1 := k.checkpoint(t, d, h)
	s2 := k.mutateChanges(t, h, 2)
	ref2 := k.checkpoint(t, d, h)
	if ref1 == ref2 {
		t.Fatalf("two different states got the same ref %q", ref1)
	}
	k.mutate(t, h, 3)

	r1, _ := k.create(t, d, ref1)
	k.expectState(t, r1, s1, "Create(ref1) after the source changed twice")
	r2, _ := k.create(t, d, ref2)
	k.expectState(t, r2, s2, "Create(ref2) after the source changed")

	k.mutate(t, r1, 4)
	again, _ := k.create(t, d, ref1)
	k.expectState(t, again, s1, "Create(ref1) after a resource restored from it changed")
}

func checkHandleUsable[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, _ := k.create(t, d, "")
	k.mutate(t, h, 1)
	before := k.snapshot(t, h)
	k.checkpoint(t, d, h)
	k.expectState(t, h, before, "the handle right after Checkpoint")
	after := k.mutateChanges(t, h, 2)
	ref := k.checkpoint(t, d, h)
	k.expectState(t, h, after, "the handle after a change and a second Checkpoint")
	r, _ := k.create(t, d, ref)
	k.expectState(t, r, after, "Create(second ref)")
}

func checkOpenSameResource[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, b := k.create(t, d, "")
	o := k.open(t, d, b)
	k.expectState(t, o, k.snapshot(t, h), "Open(binding) of a new resource")
	k.mutate(t, h, 1)
	k.expectState(t, o, k.snapshot(t, h), "the opened handle after a change through the creating one")
	k.mutate(t, o, 2)
	k.expectState(t, h, k.snapshot(t, o), "the creating handle after a change through the opened one")
	want := k.snapshot(t, o)
	ref := k.checkpoint(t, d, o)
	r, rb := k.create(t, d, ref)
	k.expectState(t, r, want, "Create(checkpoint taken through the opened handle)")

	// A restored resource's binding opens it too.
	ro := k.open(t, d, rb)
	k.expectState(t, ro, want, "Open(binding of a restored resource)")
}

func checkBindingJSON[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, b := k.create(t, d, "")
	k.mutate(t, h, 1)
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("binding does not encode as JSON: %v", err)
	}
	if bytes.Equal(data, []byte("null")) {
		t.Fatal("binding encodes as JSON null")
	}
	var back B
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("binding %s does not decode: %v", data, err)
	}
	again, err := json.Marshal(back)
	if err != nil || !bytes.Equal(data, again) {
		t.Errorf("binding does not round-trip through JSON: %s, then %s (err %v)", data, again, err)
	}
	o, err := d.Open(t.Context(), back)
	if err != nil {
		t.Fatalf("Open(binding decoded from %s): %v", data, err)
	}
	k.closeLater(t, o)
	k.expectState(t, o, k.snapshot(t, h), "Open(binding decoded from JSON)")
	k.mutate(t, o, 2)
	k.expectState(t, h, k.snapshot(t, o), "the creating handle after a change through the decoded binding's handle")
}

func checkIsolatedRestores[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	h, _ := k.create(t, d, "")
	k.mutate(t, h, 1)
	captured := k.snapshot(t, h)
	ref := k.checkpoint(t, d, h)
	a, ab := k.create(t, d, ref)
	b, bb := k.create(t, d, ref)
	if bindingText(ab) == bindingText(bb) {
		t.Errorf("two resources restored from one ref have the same binding %s", bindingText(ab))
	}
	aState := k.mutateChanges(t, a, 2)
	k.expectState(t, b, captured, "a restored resource after its sibling changed")
	k.expectState(t, h, captured, "the source after a resource restored from it changed")
	k.mutate(t, b, 2)
	k.mutate(t, b, 3)
	k.expectState(t, a, aState, "a restored resource after its sibling changed")
	k.mutate(t, h, 4)
	k.expectState(t, a, aState, "a restored resource after the source changed")
}

func checkMissingRef[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	refs := k.h.MissingRefs
	if refs == nil {
		refs = DefaultMissingRefs
	}
	for _, ref := range refs {
		h, _, err := d.Create(t.Context(), ref)
		if err == nil {
			k.closeLater(t, h)
			t.Errorf("Create(%q) of a checkpoint that does not exist succeeded", ref)
			continue
		}
		if !errors.Is(err, driver.ErrCheckpointUnavailable) {
			t.Errorf("Create(%q) = %v; want an error wrapping driver.ErrCheckpointUnavailable", ref, err)
		}
	}
}

func checkDeletedRef[H, B any](t testing.TB, k *kit[H, B]) {
	if k.h.DeleteCheckpoint == nil {
		t.Skip("Harness.DeleteCheckpoint is nil")
	}
	d := k.driver(t)
	h, _ := k.create(t, d, "")
	k.mutate(t, h, 1)
	ref := k.checkpoint(t, d, h)
	k.mutate(t, h, 2)
	keep := k.snapshot(t, h)
	keepRef := k.checkpoint(t, d, h)
	k.h.DeleteCheckpoint(t, d, ref)
	r, _, err := d.Create(t.Context(), ref)
	if err == nil {
		k.closeLater(t, r)
		t.Fatalf("Create(%q) of a deleted checkpoint succeeded", ref)
	}
	if !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Create(deleted %q) = %v; want an error wrapping driver.ErrCheckpointUnavailable", ref, err)
	}
	other, _ := k.create(t, d, keepRef)
	k.expectState(t, other, keep, "Create(another ref) after a delete")
}

// checkCollector checks driver.Collector, for a driver that implements it:
// within the grace period nothing goes; a negative grace is refused; then
// exactly the checkpoints and resources not listed go, and the listed ones
// still restore and open.
func checkCollector[H, B any](t testing.TB, k *kit[H, B]) {
	d := k.driver(t)
	c, ok := d.(driver.Collector[B])
	if !ok {
		t.Skip("the driver does not implement driver.Collector")
	}
	ctx := t.Context()
	h1, b1 := k.create(t, d, "")
	k.mutate(t, h1, 1)
	gone := k.checkpoint(t, d, h1)
	k.mutate(t, h1, 2)
	keep := k.snapshot(t, h1)
	kept := k.checkpoint(t, d, h1)
	h2, b2 := k.create(t, d, gone)
	if k.h.Close != nil {
		k.h.Close(h2)
	}
	if got, err := c.Live(ctx, nil, nil, time.Hour); err != nil || got != (driver.Collected{}) {
		t.Errorf("Live(nothing listed, grace 1h) = %+v, %v; want nothing removed: everything is younger", got, err)
	}
	if _, err := c.Live(ctx, nil, nil, -time.Second); !errors.Is(err, driver.ErrInvalidCollect) {
		t.Errorf("Live with a negative grace = %v; want ErrInvalidCollect", err)
	}
	for _, ref := range []string{gone, kept} {
		r, _ := k.create(t, d, ref)
		k.closeLater(t, r)
	}
	got, err := c.Live(ctx, []string{kept}, []B{b1}, 0)
	if err != nil {
		t.Fatalf("Live: %v", err)
	}
	if got.Checkpoints < 1 || got.Resources < 1 {
		t.Errorf("Live removed %+v; want at least the unlisted checkpoint and resource", got)
	}
	if r, _, err := d.Create(ctx, gone); !errors.Is(err, driver.ErrCheckpointUnavailable) {
		if err == nil {
			k.closeLater(t, r)
		}
		t.Errorf("Create(unlisted %q) after Live = %v; want ErrCheckpointUnavailable", gone, err)
	}
	r, _ := k.create(t, d, kept)
	k.expectState(t, r, keep, "Create(listed ref) after Live")
	k.expectState(t, k.open(t, d, b1), keep, "Open(listed binding) after Live")
	if o, err := d.Open(ctx, b2); err == nil {
		k.closeLater(t, o)
		t.Errorf("Open(unlisted binding %s) after Live succeeded", bindingText(b2))
	}
}

// bindingText renders a binding for messages and comparisons.
func bindingText(b any) string {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Sprintf("%#v", b)
	}
	return string(data)
}

// isNil reports whether v is nil or a nil pointer, map, slice, channel,
// function or interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
