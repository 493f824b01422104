package sdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// bareWrap is what a kernel builder writes first around a store (metrics,
// tracing): the IndexedLog methods and Unwrap, nothing else — none of the
// store's optional interfaces is promoted.
type bareWrap struct {
	eventlog.IndexedLog
}

func (w bareWrap) Unwrap() eventlog.Log { return w.IndexedLog }

// hiddenLeaser wraps a store without Unwrap: the kernel sees no Leaser,
// no Inbox, nothing but the IndexedLog.
type hiddenLeaser struct {
	eventlog.IndexedLog
}

// dispatchStarts returns the dispatch.started payloads of id's lineage.
func dispatchStarts(t *testing.T, k *sdk.Kernel, id eventlog.ID) []*eventlog.DispatchStarted {
	t.Helper()
	var out []*eventlog.DispatchStarted
	for _, ev := range events(t, k, id) {
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			out = append(out, ds)
		}
	}
	return out
}

// DESIGN §15½.3: a wrapper with only the Log methods and Unwrap keeps the
// store's capabilities — Cancel (the inbox), leases and fencing, Delete,
// List and Serve's claims.
func TestWrapperKeepsCapabilities(t *testing.T) {
	t.Run("pebble", func(t *testing.T) { testWrapperKeepsCapabilities(t, newStore(t)) })
	t.Run("postgres", func(t *testing.T) { testWrapperKeepsCapabilities(t, openPG(t, 1)[0]) })
}

func testWrapperKeepsCapabilities(t *testing.T, store eventlog.IndexedLog) {
	ctx := t.Context()
	w := bareWrap{store}
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return sdk.Step(ctx, "wait", func(ctx context.Context) (string, error) {
				running <- struct{}{}
				select {
				case <-release:
					return "done", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			})
		})
	}
	k := newKernel(t, w, register, sdk.WithOwner("A"))

	// Cancel goes through the inbox: with no owner running, the
	// requester appends the request and the cancellation.
	cancelled, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Cancel(ctx, cancelled, "stop"); err != nil {
		t.Fatalf("Cancel through the wrapper: %v", err)
	}
	wantEvents(t, k, cancelled, []string{"created a", "execution.cancel_requested", "execution.cancelled"})
	if evs := events(t, k, cancelled); evs[2].Data.(*eventlog.ExecutionCancelled).Reason != "stop" {
		t.Fatalf("cancelled with reason %q, want stop", evs[2].Data.(*eventlog.ExecutionCancelled).Reason)
	}

	// Run claims a lease through the wrapper: its dispatch is fenced by
	// the claim's epoch, and the live lease refuses an unleased append.
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := k.Run(ctx, id); done <- err }()
	<-running
	var leaser eventlog.Leaser
	if !eventlog.As(w, &leaser) {
		t.Fatal("eventlog.As found no Leaser through the wrapper")
	}
	held, ok, err := leaser.Holder(ctx, id)
	if err != nil || !ok || held.Owner != "A" {
		t.Fatalf("Holder during Run = %+v, %v, %v; want A's lease", held, ok, err)
	}
	head, err := w.Head(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, id, head, eventlog.Event{Data: &eventlog.MarkerRecorded{Name: "intruder"}}); !errors.Is(err, eventlog.ErrLeaseHeld) {
		t.Fatalf("unleased append during Run = %v, want ErrLeaseHeld", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "started local wait", "succeeded", "completed"})
	if ds := dispatchStarts(t, k, id); len(ds) != 1 || ds[0].Owner != "A" || ds[0].Epoch != held.Epoch {
		t.Fatalf("dispatch.started %+v, want owner A at epoch %d", ds[0], held.Epoch)
	}
	// A stale epoch is refused once another claim was made.
	stale, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := leaser.Claim(ctx, stale, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaser.Release(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := leaser.Claim(ctx, stale, "B", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(eventlog.WithEpoch(ctx, first.Epoch), stale, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1}}); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under a stale epoch through the wrapper = %v, want ErrLeaseLost", err)
	}
	wantEvents(t, k, stale, []string{"created a"})

	// Delete and List.
	if err := k.Delete(ctx, cancelled); err != nil {
		t.Fatalf("Delete through the wrapper: %v", err)
	}
	infos, err := k.List(ctx, sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []eventlog.ID
	for _, info := range infos {
		listed = append(listed, info.ID)
	}
	if diff := cmp.Diff([]eventlog.ID{id, stale}, listed); diff != "" {
		t.Fatalf("List after Delete (-want +got):\n%s", diff)
	}

	// Serve claims through the wrapper too: its dispatch records the
	// owner and an epoch.
	served, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	serveDone := make(chan error, 1)
	go func() { serveDone <- k.Serve(sctx, sdk.PollEvery(20*time.Millisecond)) }()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	res, err := k.Wait(wctx, served)
	cancel()
	stop()
	if serr := <-serveDone; serr != nil {
		t.Errorf("Serve = %v", serr)
	}
	if err != nil || string(res.Output) != `"done"` {
		t.Fatalf("Wait = %v, %v", res, err)
	}
	wantEvents(t, k, served, []string{"created a", "dispatch 1", "started local wait", "succeeded", "completed"})
	if ds := dispatchStarts(t, k, served); ds[0].Owner != "A" || ds[0].Epoch == 0 {
		t.Fatalf("Serve's dispatch.started %+v, want owner A under an epoch", ds[0])
	}
}

// DESIGN §15½.2: dispatch.started records the kernel's owner on a store
// without a Leaser too.
func TestOwnerRecordedWithoutLeaser(t *testing.T) {
	ctx := t.Context()
	k := newKernel(t, hiddenLeaser{newStore(t)}, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(context.Context, none) (string, error) { return "ok", nil })
	}, sdk.WithOwner("solo"))
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "completed"})
	ds := dispatchStarts(t, k, id)
	if ds[0].Owner != "solo" || ds[0].Epoch != 0 {
		t.Fatalf("dispatch.started %+v, want owner solo, no epoch", ds[0])
	}
}

// crashInFolder runs agent h (hostsAgent) on the Pebble log in dir under
// the owner name owner until the at_most_once step is in flight against
// the resource (the head uncovered), then "dies" and closes the log.
func crashInFolder(t *testing.T, dir string, owner func() string, drv *testdriver.Driver) eventlog.ID {
	t.Helper()
	store, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, before := crashAt(t, store, drv, 8, sdk.WithOwner(owner()))
	if got := describe(before[len(before)-1]); got != "started tool touch affects=ws at_most_once" {
		t.Fatalf("head = %s, want the at_most_once step in flight", got)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return id
}

// resumeOwnBinding opens a kernel on dir with sdk.Open and runs id: the
// kernel must be the same owner, reopen the binding (no new one) and meet
// the at_most_once orphan, which fails indeterminate.
func resumeOwnBinding(t *testing.T, dir string, drv *testdriver.Driver, id eventlog.ID) *sdk.Kernel {
	t.Helper()
	k, err := sdk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	hostsAgent(drv)(k)
	creates, opens, _ := drv.Counts()
	if _, err := k.Run(context.Background(), id); !errors.Is(err, sdk.ErrIndeterminate) {
		t.Fatalf("Run = %v, want the orphan's ErrIndeterminate (the binding reopened)", err)
	}
	if c2, o2, _ := drv.Counts(); o2-opens != 1 || c2 != creates {
		t.Fatalf("resume opened %d and created %d resources, want 1 and 0", o2-opens, c2-creates)
	}
	wantEvents(t, k, id, []string{"created h", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=2",
		"started tool touch affects=ws at_most_once",
		"dispatch 2", "failed indeterminate", "captured ws steps gen=3", "execution_failed handler"})
	return k
}

// DESIGN §15½.2: LocalOwner names a Pebble folder by the identity written
// into it, not its path: a folder moved on its host (os.Rename) keeps its
// owner, so an execution whose non-portable resource is uncovered resumes
// there, reopening its binding — not a takeover.
func TestLocalOwnerSurvivesMove(t *testing.T) {
	root := t.TempDir()
	dir, moved := filepath.Join(root, "log"), filepath.Join(root, "moved")
	drv := testdriver.New().WithoutPortable()
	var before string
	id := crashInFolder(t, dir, func() string { before = sdk.LocalOwner(dir); return before }, drv)
	if !regexp.MustCompile(`:folder-[0-9a-f]{32}$`).MatchString(before) || strings.Contains(before, root) {
		t.Fatalf("LocalOwner(%q) = %q, want the host and the folder's ID, not its path", dir, before)
	}
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if got := sdk.LocalOwner(moved); got != before {
		t.Fatalf("LocalOwner after the move = %q, want %q", got, before)
	}
	k := resumeOwnBinding(t, moved, drv, id)
	if ds := dispatchStarts(t, k, id); ds[1].Owner != before {
		t.Fatalf("the resumed dispatch's owner is %q, want %q", ds[1].Owner, before)
	}
}

// DESIGN §15½.2, compatibility: a folder made before identities recorded
// the owner as host and path. Its first writable open gives it an ID and
// keeps that former name as the same owner, so the upgrade is no takeover
// of its executions.
func TestLocalOwnerKeepsFormerName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	drv := testdriver.New().WithoutPortable()
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	legacy := host + ":" + dir // what LocalOwner was before identities
	id := crashInFolder(t, dir, func() string { return legacy }, drv)
	// The folder as an older build left it: no identity file.
	if err := os.Remove(filepath.Join(dir, "FORKLINE-ID")); err != nil {
		t.Fatal(err)
	}
	if got := sdk.LocalOwner(dir); got != legacy {
		t.Fatalf("LocalOwner of a folder without an identity = %q, want %q", got, legacy)
	}
	k := resumeOwnBinding(t, dir, drv, id)
	ident, err := pebblestore.ReadIdentity(dir)
	if err != nil || ident.FormerPath != dir {
		t.Fatalf("identity after the first open = %+v, %v; want the former path %s", ident, err, dir)
	}
	if ds := dispatchStarts(t, k, id); ds[0].Owner != legacy || ds[1].Owner != sdk.LocalOwner(dir) || ds[1].Owner == legacy {
		t.Fatalf("dispatch owners %q then %q, want %q then the new name", ds[0].Owner, ds[1].Owner, legacy)
	}
}
