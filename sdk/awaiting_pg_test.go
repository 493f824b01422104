package sdk_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// claimRunnableCounter counts how many times ClaimRunnable claimed one
// execution.
type claimRunnableCounter struct {
	*pgstore.Store
	id     eventlog.ID
	claims atomic.Int64
}

func (c *claimRunnableCounter) ClaimRunnable(ctx context.Context, owner string, ttl time.Duration, agents []string, n int, now time.Time) ([]eventlog.Lease, error) {
	ls, err := c.Store.ClaimRunnable(ctx, owner, ttl, agents, n, now)
	for _, l := range ls {
		if l.ID == c.id {
			c.claims.Add(1)
		}
	}
	return ls, err
}

// ClaimRunnableVersion counts too: Serve claims through it (DESIGN §19).
func (c *claimRunnableCounter) ClaimRunnableVersion(ctx context.Context, owner string, ttl time.Duration, agents []string, worker string, n int, now time.Time) ([]eventlog.Lease, error) {
	ls, err := c.Store.ClaimRunnableVersion(ctx, owner, ttl, agents, worker, n, now)
	for _, l := range ls {
		if l.ID == c.id {
			c.claims.Add(1)
		}
	}
	return ls, err
}

// DESIGN §15½.4 on Postgres: Serve on owner b, which must leave an
// execution to its owner a, notes it in the store (Info: AwaitedOwner a,
// LastError "awaiting owner", a RetryAt), so that its claims skip
// it: over a second of 10 ms polls it claims it at most twice (the first
// try and one backoff retry), appends nothing, and the execution stays
// running. Owner a's Serve then claims it despite a note for an hour,
// completes it, and the note is gone.
func TestServeLeavesAwaitedExecutionAloneOnPostgres(t *testing.T) {
	stores := openPG(t, 2)
	drv := testdriver.New().WithoutPortable()
	id, before := crashAt(t, stores[0], drv, 8)
	counted := &claimRunnableCounter{Store: stores[1], id: id}
	b := newKernel(t, counted, tolerantHostsAgent(drv), sdk.WithOwner("b"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := b.Serve(ctx, sdk.PollEvery(10*time.Millisecond)); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if n := counted.claims.Load(); n < 1 || n > 2 {
		t.Errorf("Serve claimed the awaited execution %d times in 1s, want 1 or 2 (no claim at every poll)", n)
	}
	if diff := cmp.Diff(describeAll(before), describeAll(events(t, b, id))); diff != "" {
		t.Fatalf("Serve appended (-before +after):\n%s", diff)
	}
	info, err := stores[1].Info(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != eventlog.StatusRunning || info.AwaitedOwner != "a" ||
		!strings.Contains(info.LastError, `awaiting owner "a"`) || info.RetryAt.IsZero() {
		t.Fatalf("Info: status %s, AwaitedOwner %q, LastError %q, RetryAt %v; want running, awaiting a, a RetryAt",
			info.Status, info.AwaitedOwner, info.LastError, info.RetryAt)
	}

	serveAwaitedOwner(t, stores[0], stores[0], id, drv)
}
