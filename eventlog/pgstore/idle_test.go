package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/pgtest"
)

// TestPausedTransactionReleasesLock: an owner paused inside one of the
// store's transactions — holding its execution's row lock — does not keep
// the execution from every other worker once its lease has expired: the
// server ends the idle transaction (IdleInTransactionTimeout, here set to
// 1 s through the URL) and another store's ClaimRunnable, which skips
// locked rows, claims it. Found by reliability.TestPostgresWorkers, whose
// SIGSTOPped worker kept an execution locked, unclaimable, for minutes.
func TestPausedTransactionReleasesLock(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	other, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var setting string
	if err := other.pool.QueryRow(ctx, "SHOW "+idleParam).Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "10s" {
		t.Errorf("the store's connections have %s = %s, want 10s (IdleInTransactionTimeout)", idleParam, setting)
	}

	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	paused, err := Open(ctx, url+sep+idleParam+"=1000", WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Close()
	id, err := paused.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := paused.Claim(ctx, id, "paused", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The owner stops between two statements of a transaction that locked
	// the execution's row, as every append does.
	tx, err := paused.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+paused.q.executions+` WHERE id = $1 FOR UPDATE`, id[:]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		leases, err := other.ClaimRunnable(ctx, "other", time.Minute, []string{"a"}, 1, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) == 1 && leases[0].ID == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s, locked by a paused transaction whose lease expired, was not claimable within a minute", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the paused transaction still works after the server should have ended it")
	}
}
