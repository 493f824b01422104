package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// versionAgent registers agent "v", one step that doubles its input.
func versionAgent(k *sdk.Kernel) {
	_, _ = sdk.Register(k, "v", func(ctx context.Context, n int) (int, error) {
		return sdk.Step(ctx, "double", func(context.Context) (int, error) { return 2 * n, nil })
	})
}

// createdVersion returns the Version of id's execution.created and of its
// newest fork.created (the fold's inputs, DESIGN §21½.5).
func createdVersion(t *testing.T, k *sdk.Kernel, id eventlog.ID) (created, forked string, forks int) {
	t.Helper()
	for _, ev := range events(t, k, id) {
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCreated:
			created = p.Version
		case *eventlog.ForkCreated:
			forked, forks = p.Version, forks+1
		}
	}
	return created, forked, forks
}

// dispatchOwners returns the Owner of each dispatch.started of id's own
// run (after its newest fork.created, if any).
func dispatchOwners(t *testing.T, k *sdk.Kernel, id eventlog.ID) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, k, id) {
		switch p := ev.Data.(type) {
		case *eventlog.ForkCreated:
			out = nil
		case *eventlog.DispatchStarted:
			out = append(out, p.Owner)
		}
	}
	return out
}

// DESIGN §19, §21½.5: Start records the kernel's version in
// execution.created; Run by a kernel of another version, or by an
// unversioned one, returns a *VersionError naming both versions and
// appends nothing (not even dispatch.started) and leaves no lease; the
// kernel of its version runs it; an unversioned execution runs anywhere.
func TestRunOtherVersionAppendsNothing(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	k1 := newKernel(t, store, versionAgent, sdk.WithVersion("v1"), sdk.WithOwner("one"))
	k2 := newKernel(t, store, versionAgent, sdk.WithVersion("v2"), sdk.WithOwner("two"))
	k0 := newKernel(t, store, versionAgent, sdk.WithOwner("none"))
	id, err := k1.Start(ctx, "v", 21)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := createdVersion(t, k1, id); c != "v1" {
		t.Fatalf("execution.created Version = %q, want v1", c)
	}
	before := describeAll(events(t, k1, id))
	for _, k := range []*sdk.Kernel{k2, k0} {
		_, err := k.Run(ctx, id)
		var ve *sdk.VersionError
		if !errors.Is(err, sdk.ErrVersion) || !errors.As(err, &ve) || ve.Version != "v1" || ve.Worker != k.Version() || ve.ID != id {
			t.Fatalf("Run by a kernel of version %q = %v; want a *VersionError naming v1 and %q", k.Version(), err, k.Version())
		}
		if diff := cmp.Diff(before, describeAll(events(t, k1, id))); diff != "" {
			t.Fatalf("a refused Run appended (-before +after):\n%s", diff)
		}
		if l, held, err := store.Holder(ctx, id); err != nil || held {
			t.Fatalf("a refused Run left a lease: %+v, %v, %v", l, held, err)
		}
	}
	res, err := k1.Run(ctx, id)
	if err != nil || string(res.Output) != "42" {
		t.Fatalf("Run by its version = %+v, %v; want 42", res, err)
	}
	if got := dispatchOwners(t, k1, id); !cmp.Equal(got, []string{"one"}) {
		t.Fatalf("dispatches by %v, want [one]", got)
	}

	// An unversioned execution (started by an unversioned kernel) runs
	// on a versioned kernel.
	free, err := k0.Start(ctx, "v", 1)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := createdVersion(t, k0, free); c != "" {
		t.Fatalf("an unversioned kernel recorded Version %q", c)
	}
	if _, err := k2.Run(ctx, free); err != nil {
		t.Fatalf("Run of an unversioned execution on v2: %v", err)
	}
	if got := dispatchOwners(t, k2, free); !cmp.Equal(got, []string{"two"}) {
		t.Fatalf("dispatches by %v, want [two]", got)
	}
	info, err := k2.Info(ctx, id)
	if err != nil || info.Version != "v1" {
		t.Fatalf("Info.Version = %q, %v; want v1", info.Version, err)
	}
}

// DESIGN §19, §21½.5: a fork keeps its parent's version (recorded in
// fork.created's Version) unless OnVersion moves it; the moved fork is
// left alone by the old kernel's Run and Serve and run by the new
// kernel's Serve.
func TestForkOnVersionMovesExecution(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	k1 := newKernel(t, store, versionAgent, sdk.WithVersion("v1"), sdk.WithOwner("one"))
	k2 := newKernel(t, store, versionAgent, sdk.WithVersion("v2"), sdk.WithOwner("two"))
	id, err := k1.Start(ctx, "v", 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	kept, err := k1.Fork(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, f, n := createdVersion(t, k1, kept); n != 1 || f != "v1" {
		t.Fatalf("a fork without OnVersion recorded fork.created Version %q (%d forks), want v1", f, n)
	}
	moved, err := k1.Fork(ctx, id, 1, sdk.OnVersion("v2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, f, _ := createdVersion(t, k1, moved); f != "v2" {
		t.Fatalf("fork.created Version = %q, want v2", f)
	}
	if info, err := k1.Info(ctx, moved); err != nil || info.Version != "v2" {
		t.Fatalf("Info.Version of the moved fork = %q, %v; want v2", info.Version, err)
	}
	before := describeAll(events(t, k1, moved))
	if _, err := k1.Run(ctx, moved); !errors.Is(err, sdk.ErrVersion) {
		t.Fatalf("Run of the moved fork on v1 = %v, want ErrVersion", err)
	}
	// The old kernel's Serve runs its own fork and leaves the moved one:
	// both were runnable in the pass that found the kept fork.
	serveUntil(t, k1, kept)
	if diff := cmp.Diff(before, describeAll(events(t, k1, moved))); diff != "" {
		t.Fatalf("v1's Serve appended to the fork moved to v2 (-before +after):\n%s", diff)
	}
	if got := dispatchOwners(t, k1, kept); !cmp.Equal(got, []string{"one"}) {
		t.Fatalf("the kept fork's dispatches by %v, want [one]", got)
	}
	serveUntil(t, k2, moved)
	if got := dispatchOwners(t, k2, moved); !cmp.Equal(got, []string{"two"}) {
		t.Fatalf("the moved fork's dispatches by %v, want [two]", got)
	}
	if _, err := k1.Fork(ctx, id, 1, sdk.OnVersion("bad\x00")); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("OnVersion with a NUL byte = %v, want ErrInvalid", err)
	}
	if _, err := sdk.New(store, sdk.WithVersion("\xff")); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("WithVersion of invalid UTF-8 = %v, want ErrInvalid", err)
	}
}

// serveUntil runs k's Serve until id completed (at most 10 s).
func serveUntil(t *testing.T, k *sdk.Kernel, ids ...eventlog.ID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- k.Serve(ctx, sdk.PollEvery(10*time.Millisecond)) }()
	waitCompleted(t, k, ids...)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitCompleted waits up to 10 s for every id to complete.
func waitCompleted(t *testing.T, k *sdk.Kernel, ids ...eventlog.ID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for {
			info, err := k.Info(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if info.Status == eventlog.StatusCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s after 10 s, want completed", id, info.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// DESIGN §19 on Postgres: two kernels of versions v1 and v2, each on its
// own connection to one database (two hosts of a rolling deploy), Serve
// together; each runs only the executions of its version (their
// dispatch.started name its owner), either may run the unversioned ones,
// and a fork moved from v1 to v2 is run by the v2 kernel.
func TestServeByVersionOnPostgres(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	k1 := newKernel(t, stores[0], versionAgent, sdk.WithVersion("v1"), sdk.WithOwner("one"))
	k2 := newKernel(t, stores[1], versionAgent, sdk.WithVersion("v2"), sdk.WithOwner("two"))
	k0 := newKernel(t, stores[0], versionAgent, sdk.WithOwner("starter"))
	var ones, twos, frees []eventlog.ID
	for i := range 4 {
		a, err := k1.Start(ctx, "v", i)
		if err != nil {
			t.Fatal(err)
		}
		b, err := k2.Start(ctx, "v", i)
		if err != nil {
			t.Fatal(err)
		}
		c, err := k0.Start(ctx, "v", i)
		if err != nil {
			t.Fatal(err)
		}
		ones, twos, frees = append(ones, a), append(twos, b), append(frees, c)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	for _, k := range []*sdk.Kernel{k1, k2} {
		go func() { done <- k.Serve(sctx, sdk.PollEvery(10*time.Millisecond)) }()
	}
	waitCompleted(t, k0, append(append(append([]eventlog.ID{}, ones...), twos...), frees...)...)
	moved, err := k1.Fork(ctx, ones[0], 1, sdk.OnVersion("v2"))
	if err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, k0, moved)
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		ids   []eventlog.ID
		owner string
	}{{ones, "one"}, {twos, "two"}, {[]eventlog.ID{moved}, "two"}} {
		for _, id := range c.ids {
			if got := dispatchOwners(t, k0, id); !cmp.Equal(got, []string{c.owner}) {
				t.Errorf("%s: dispatches by %v, want [%s]", id, got, c.owner)
			}
		}
	}
	for _, id := range frees {
		if got := dispatchOwners(t, k0, id); len(got) != 1 || (got[0] != "one" && got[0] != "two") {
			t.Errorf("unversioned %s: dispatches by %v, want one dispatch by one or two", id, got)
		}
	}
}
