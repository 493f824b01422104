package pgstore

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/pgtest"
)

// TestClaimRunnableSkipsLockedRows: ClaimRunnable skips an execution whose
// row another transaction holds locked instead of waiting on it: with one
// of three runnable executions locked, it returns promptly with the two
// others, leases them in the store, and leaves the locked one unclaimed.
func TestClaimRunnableSkipsLockedRows(t *testing.T) {
	ctx := t.Context()
	s := openInternal(t, "")
	var ids []eventlog.ID
	for range 3 {
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b eventlog.ID) int { return strings.Compare(string(a[:]), string(b[:])) })
	locked := ids[0] // the first in ClaimRunnable's order
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s.q.executions+` WHERE id = $1 FOR UPDATE`, locked[:]); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	leases, err := s.ClaimRunnable(cctx, "worker", time.Minute, []string{"a"}, 3, time.Now())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("ClaimRunnable with a row locked elsewhere = %v after %v, want the other rows at once", err, took)
	}
	if took > 2*time.Second {
		t.Errorf("ClaimRunnable took %v: it waited on the locked row", took)
	}
	var got []eventlog.ID
	for _, l := range leases {
		if l.Owner != "worker" || l.Epoch == 0 {
			t.Errorf("lease %+v", l)
		}
		got = append(got, l.ID)
	}
	slices.SortFunc(got, func(a, b eventlog.ID) int { return strings.Compare(string(a[:]), string(b[:])) })
	if !slices.Equal(got, ids[1:]) {
		t.Fatalf("ClaimRunnable claimed %v, want the two unlocked executions %v", got, ids[1:])
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		l, ok, err := s.Holder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := i > 0; ok != want || (ok && l.Owner != "worker") {
			t.Errorf("Holder(%s) = %+v, %v; want held by worker: %v", id, l, ok, want)
		}
	}
	// Once the lock is gone, the execution it skipped is claimable.
	leases, err = s.ClaimRunnable(ctx, "worker", time.Minute, []string{"a"}, 3, time.Now())
	if err != nil || len(leases) != 1 || leases[0].ID != locked {
		t.Fatalf("ClaimRunnable after the lock ended = %+v, %v; want %s alone", leases, err, locked)
	}
}

// TestIdleTimeoutFromURLKept: an idle_in_transaction_session_timeout the
// URL sets is the one the store's connections carry, not overridden by
// IdleInTransactionTimeout; without one in the URL, the default applies.
func TestIdleTimeoutFromURLKept(t *testing.T) {
	for _, c := range []struct{ param, want string }{
		{"", "10s"},
		{"1500", "1500ms"},
		{"3min", "3min"},
		{"0", "0"},
	} {
		s := openInternal(t, c.param)
		conns := make([]string, 0, 2)
		for range 2 { // every connection of the pool, not only the first
			conn, err := s.pool.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			var setting string
			if err := conn.QueryRow(t.Context(), "SHOW "+idleParam).Scan(&setting); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, setting)
		}
		for _, got := range conns {
			if got != c.want {
				t.Errorf("URL %s=%q: the store's connections have %s, want %s", idleParam, c.param, got, c.want)
			}
		}
	}
}

// openInternal opens a store in a fresh schema; a non-empty idle sets
// idle_in_transaction_session_timeout in the URL.
func openInternal(t *testing.T, idle string) *Store {
	t.Helper()
	url, schema := pgtest.Schema(t)
	if idle != "" {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + idleParam + "=" + idle
	}
	s, err := Open(t.Context(), url, WithSchema(schema), WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
