package benchmarks

import (
	"fmt"
	"path/filepath"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Scenario 15, the lighter mode of DESIGN §21: scenario 7's workflow of
// N durable steps on a kernel with sdk.Durability(sdk.SyncAtEffects)
// against the same workflow under the default, sdk.SyncEveryStep — on
// Pebble (sdk.Open on disk, each kernel its own folder), 1 and many
// workflows at a time, and, with -postgres, on pgstore (two kernels on one
// store). Steps per second of completed workflows; the ratio is the
// mode's gain. The two do not give the same guarantee, and the rows say
// which each gives.

// durabilityGuarantee is what SyncAtEffects gives, written beside its rows.
const durabilityGuarantee = "Guarantee under SyncAtEffects: a safe_to_retry step's outcome is appended unsynced and becomes durable with the next synced append (an at_most_once intent, an approval, a park, a capture, the completion); after a crash (of the machine; on Pebble, of the process too) the safe_to_retry steps since the last synced append run again, at_most_once bodies still run at most once, and a completed result is an uninterrupted run's. Under SyncEveryStep (the default, the baseline) every step's outcome is synced before the caller sees it: a crash re-runs only steps whose bodies had not ended."

// runDurability is scenario 15 (13 and 14 name the governance and HTTP-kernel rows of RESULTS.md, measured by go test).
func runDurability(e *env) ([]Row, error) {
	dir, err := e.mkdir("durability")
	if err != nil {
		return nil, err
	}
	lazy, err := openPeerKernel(filepath.Join(dir, "sync-at-effects"), sdk.Durability(sdk.SyncAtEffects))
	if err != nil {
		return nil, err
	}
	defer lazy.Close()
	every, err := openPeerKernel(filepath.Join(dir, "sync-every-step"))
	if err != nil {
		return nil, err
	}
	defer every.Close()
	rows, err := durabilityRows(e, "Pebble", []string{"15a", "15b"}, "pebble", lazy, every)
	if err != nil {
		return nil, err
	}
	if e.cfg.Postgres == "" {
		e.logf("   Postgres rows skipped: no Postgres URL (Config.Postgres, bench -postgres)")
		return rows, nil
	}
	b, err := openPGBench(e.ctx, e.cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st, err := b.store(e.ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	pgLazy, err := newPeerKernel(st, sdk.Durability(sdk.SyncAtEffects), sdk.WithOwner("sync-at-effects"))
	if err != nil {
		return nil, err
	}
	defer pgLazy.Close()
	pgEvery, err := newPeerKernel(st, sdk.WithOwner("sync-every-step"))
	if err != nil {
		return nil, err
	}
	defer pgEvery.Close()
	pgRows, err := durabilityRows(e, "Postgres", []string{"15c", "15d"}, "postgres", pgLazy, pgEvery)
	if err != nil {
		return nil, err
	}
	return append(rows, pgRows...), nil
}

// newPeerKernel makes a kernel on log with scenario 7's workflow.
func newPeerKernel(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
	k, err := sdk.New(log, opts...)
	if err != nil {
		return nil, err
	}
	if err := registerPeer(k); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// durabilityRows measures the workflow on lazy (SyncAtEffects) against
// every (SyncEveryStep), 1 and PeerConcurrent at a time.
func durabilityRows(e *env, store string, ids []string, key string, lazy, every *sdk.Kernel) ([]Row, error) {
	steps := e.sizes.PeerSteps
	for _, k := range []*sdk.Kernel{lazy, every} {
		if err := runPeerKernel(e.ctx, k, steps); err != nil {
			return nil, err
		}
	}
	var rows []Row
	for i, c := range []int{1, e.sizes.PeerConcurrent} {
		d := e.cfg.Duration
		rates, load, err := e.interleave(
			contestant{fmt.Sprintf("%s SyncAtEffects, %d workflows at a time", store, c), parallel(c, d, func(int) (float64, error) {
				return float64(steps), runPeerKernel(e.ctx, lazy, steps)
			})},
			contestant{fmt.Sprintf("%s SyncEveryStep, %d workflows at a time", store, c), parallel(c, d, func(int) (float64, error) {
				return float64(steps), runPeerKernel(e.ctx, every, steps)
			})},
		)
		if err != nil {
			return nil, err
		}
		fl := Figure{What: "forkline, SyncAtEffects", Value: median(rates[0]), Unit: "steps/s", Rounds: rates[0]}
		base := Figure{What: "forkline, SyncEveryStep (default)", Value: median(rates[1]), Unit: "steps/s", Rounds: rates[1]}
		label := "1 workflow at a time"
		if c > 1 {
			label = fmt.Sprintf("%d workflows at a time", c)
		}
		row := rowOf(ids[i], fmt.Sprintf("workflow of %d durable steps on %s, %s, SyncAtEffects vs SyncEveryStep (a weaker guarantee: see the note)", steps, store, label),
			fmt.Sprintf("Durability/store=%s/mode=sync_at_effects/concurrency=%d", key, c), fl, base, div, "SyncAtEffects/SyncEveryStep", "", nil, load)
		row.Note = fmt.Sprintf("Steps of completed workflows per second, scenario 7's workflow (%d safe_to_retry tool calls) under sdk.Durability(sdk.SyncAtEffects) and under the default. %s", steps, durabilityGuarantee)
		rows = append(rows, row)
	}
	return rows, nil
}
