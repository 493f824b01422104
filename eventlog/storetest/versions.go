package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestVersions checks code versions (DESIGN §19, §21½.5): the store keeps
// execution.created's Version, and a fork's fork.created Version, as
// Info.Version; List filters by it; ClaimVersion (eventlog.VersionClaimer,
// required) claims only an execution whose version is "" or the
// worker's, and a refused claim writes nothing — no lease, no epoch; on an
// eventlog.VersionedClaimer, ClaimRunnableVersion claims exactly the
// runnable executions of the worker's version and the unversioned ones.
// open returns a fresh, empty store.
func TestVersions(t *testing.T, open func(t *testing.T) eventlog.IndexedLog) {
	s := open(t)
	ctx := t.Context()
	var vc eventlog.VersionClaimer
	if !eventlog.As(s, &vc) {
		t.Fatalf("%T does not implement eventlog.VersionClaimer", s)
	}
	create := func(agent, version string) eventlog.ID {
		t.Helper()
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: agent, Input: []byte(`1`), Version: version}, time.Now())
		if err != nil {
			t.Fatalf("Create(version %q): %v", version, err)
		}
		return id
	}
	wantVersion := func(id eventlog.ID, want string) {
		t.Helper()
		info, err := s.Info(ctx, id)
		if err != nil {
			t.Fatalf("Info(%s): %v", id, err)
		}
		if info.Version != want {
			t.Fatalf("Info(%s).Version = %q, want %q", id, info.Version, want)
		}
	}
	v1, v2, none := create("a", "v1"), create("a", "v2"), create("a", "")
	wantVersion(v1, "v1")
	wantVersion(v2, "v2")
	wantVersion(none, "")
	if p := readEvents(t, s, v1)[0].Data.(*eventlog.ExecutionCreated); p.Version != "v1" {
		t.Fatalf("execution.created Version = %q, want v1", p.Version)
	}

	// A fork records its version in fork.created, and the store keeps it.
	moved, err := s.Fork(ctx, v1, 1, &eventlog.ForkCreated{Version: "v2"}, time.Now())
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	wantVersion(moved, "v2")
	evs := readEvents(t, s, moved)
	if fc, ok := evs[len(evs)-1].Data.(*eventlog.ForkCreated); !ok || fc.Version != "v2" {
		t.Fatalf("the fork's own event is %+v, want fork.created with Version v2", evs[len(evs)-1].Data)
	}
	wantVersion(v1, "v1") // the parent stays

	var got []eventlog.ID
	for _, info := range listAll(t, s, eventlog.Filter{Version: "v2"}) {
		got = append(got, info.ID)
	}
	if want := []eventlog.ID{v2, moved}; !slices.Equal(got, want) {
		t.Fatalf("List(Version v2) = %v, want %v", got, want)
	}

	// A claim by a worker of another version is refused and writes nothing.
	for _, c := range []struct {
		id      eventlog.ID
		version string
		worker  string
	}{{v1, "v1", "v2"}, {v1, "v1", ""}, {moved, "v2", "v1"}} {
		_, err := vc.ClaimVersion(ctx, c.id, "w", time.Minute, c.worker)
		var ve *eventlog.VersionError
		if !errors.Is(err, eventlog.ErrVersion) || !errors.As(err, &ve) || ve.Version != c.version || ve.Worker != c.worker || ve.ID != c.id {
			t.Fatalf("ClaimVersion(%s of %q) by worker %q = %v, want a *VersionError naming both", c.id, c.version, c.worker, err)
		}
		if l, held, err := vc.Holder(ctx, c.id); err != nil || held {
			t.Fatalf("after a refused claim Holder = %+v, %v, %v; want no lease", l, held, err)
		}
	}
	for _, c := range []struct {
		id     eventlog.ID
		worker string
	}{{v1, "v1"}, {none, "v2"}, {moved, "v2"}} {
		l, err := vc.ClaimVersion(ctx, c.id, "w", time.Minute, c.worker)
		if err != nil {
			t.Fatalf("ClaimVersion(%s) by worker %q: %v", c.id, c.worker, err)
		}
		if l.Epoch != 1 {
			t.Fatalf("ClaimVersion(%s) epoch %d, want 1: a refused claim spent an epoch", c.id, l.Epoch)
		}
		if err := vc.Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}

	var bc eventlog.VersionedClaimer
	if !eventlog.As(s, &bc) {
		return
	}
	b1, b2, bnone := create("bulk", "v1"), create("bulk", "v2"), create("bulk", "")
	bmoved, err := s.Fork(ctx, b1, 1, &eventlog.ForkCreated{Version: "v2"}, time.Now())
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	ls, err := bc.ClaimRunnableVersion(ctx, "w2", time.Minute, []string{"bulk"}, "v2", 10, time.Now())
	if err != nil {
		t.Fatalf("ClaimRunnableVersion(v2): %v", err)
	}
	got = got[:0]
	for _, l := range ls {
		got = append(got, l.ID)
	}
	want := []eventlog.ID{b2, bnone, bmoved}
	slices.SortFunc(want, func(a, b eventlog.ID) int { return slices.Compare(a[:], b[:]) })
	if !slices.Equal(got, want) {
		t.Fatalf("ClaimRunnableVersion(v2) claimed %v, want %v (v2, unversioned, the fork moved to v2)", got, want)
	}
	if _, held, err := bc.Holder(ctx, b1); err != nil || held {
		t.Fatalf("ClaimRunnableVersion(v2) leased the v1 execution: held %v, %v", held, err)
	}
	ls, err = bc.ClaimRunnableVersion(ctx, "w1", time.Minute, []string{"bulk"}, "v1", 10, time.Now())
	if err != nil || len(ls) != 1 || ls[0].ID != b1 {
		t.Fatalf("ClaimRunnableVersion(v1) = %+v, %v; want only %s", ls, err, b1)
	}
}
