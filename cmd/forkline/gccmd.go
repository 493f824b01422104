package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// cmdDelete deletes one execution (DESIGN §14).
func cmdDelete(e *env, prefix string) error {
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, prefix)
		if err != nil {
			return err
		}
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		if err := k.Delete(e.ctx, info.ID); err != nil {
			if errors.Is(err, sdk.ErrRunning) {
				return &inputError{fmt.Errorf("%w (forkline cancel %s)", err, info.ID)}
			}
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"deleted": []string{info.ID.String()}})
		}
		fmt.Fprintf(e.stdout, "deleted %s (%s, %s)\n", info.ID, info.Agent, info.Status)
		return nil
	})
}

// cmdUnquarantine lifts the quarantine of the execution prefix names
// (eventlog.Quarantiner): Serve runs it again. One that is not
// quarantined is left as it is, and said so.
func cmdUnquarantine(e *env, prefix string) error {
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, prefix)
		if err != nil {
			return err
		}
		var q eventlog.Quarantiner
		if !eventlog.As(s, &q) {
			return inputErrorf("unquarantine: this log keeps no quarantine")
		}
		was, err := q.Unquarantine(e.ctx, info.ID)
		if err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "was_quarantined": was, "error": info.QuarantineError})
		}
		if !was {
			fmt.Fprintf(e.stdout, "%s is not quarantined; nothing changed\n", info.ID)
			return nil
		}
		fmt.Fprintf(e.stdout, "lifted the quarantine of %s (%s); Serve runs it again\n", info.ID, clip(oneLine(info.QuarantineError), 200))
		return nil
	})
}

// gcStatuses are the statuses gc deletes by default: the ended ones.
const gcStatuses = "completed,failed,cancelled"

// durationSyntax is what time.ParseDuration reads when the value fits: a
// duration it refuses that matches is too long.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// parseGC checks gc's flags: the statuses (never running: a running
// execution is refused by Delete) and a positive age.
func parseGC(statuses, olderThan string) (eventlog.Filter, time.Duration, error) {
	f, err := parseFilter("gc", statuses, "")
	if err != nil {
		return f, 0, err
	}
	if len(f.Status) == 0 {
		return f, 0, inputErrorf("gc --status: name at least one status (say %s)", gcStatuses)
	}
	if slices.Contains(f.Status, eventlog.StatusRunning) {
		return f, 0, inputErrorf("gc --status running: a running execution cannot be deleted; cancel it first")
	}
	if olderThan == "" {
		return f, 0, inputErrorf("gc: --older-than DURATION is required (say 168h for a week)")
	}
	age, err := time.ParseDuration(olderThan)
	if err != nil && durationSyntax.MatchString(olderThan) {
		return f, 0, inputErrorf("gc --older-than %s: too long: a duration goes up to %s (about 292 years)",
			clip(olderThan, 64), time.Duration(math.MaxInt64).Truncate(time.Hour))
	}
	if err != nil {
		return f, 0, inputErrorf("gc --older-than %q: want a Go duration such as 168h or 90m", clip(olderThan, 64))
	}
	if age < 0 {
		return f, 0, inputErrorf("gc --older-than %s: the age must not be negative", olderThan)
	}
	return f, age, nil
}

// cmdGC deletes every execution of the given statuses whose newest event
// is older than the given age, then drops from the demo's workspace store
// (DIR/dirfs) the checkpoints and workspaces no kept execution can select
// or open, sparing what is younger than grace.
func cmdGC(e *env, statuses, olderThan string, grace time.Duration, dryRun bool) error {
	f, age, err := parseGC(statuses, olderThan)
	if err != nil {
		return err
	}
	if grace < 0 {
		return inputErrorf("gc --grace %s: the grace period must not be negative", grace)
	}
	open := withReadLog
	if !dryRun {
		open = func(e *env, fn func(s eventlog.IndexedLog) error) error {
			return withLog(e, func(s logStore) error { return fn(s) })
		}
	}
	return open(e, func(s eventlog.IndexedLog) error {
		cutoff := time.Now().Add(-age)
		var old []eventlog.Info
		for info, err := range s.List(e.ctx, f) {
			if err != nil {
				return fmt.Errorf("list executions: %w", err)
			}
			if info.Updated.Before(cutoff) {
				old = append(old, info)
			}
		}
		var deleted []string
		var failed []string
		var collected *driver.Collected
		var swept *pebblestore.SweepStats
		sw, canSweep := s.(sweeper)
		if !dryRun {
			k, err := sdk.New(s)
			if err != nil {
				return err
			}
			for _, info := range old {
				if err := k.Delete(e.ctx, info.ID); err != nil {
					// One execution that cannot go (it started running
					// meanwhile) does not stop the others.
					failed = append(failed, fmt.Sprintf("%s: %v", info.ID, err))
					continue
				}
				deleted = append(deleted, info.ID.String())
			}
			if len(deleted) > 0 && canSweep {
				st, err := sw.Sweep(e.ctx)
				if err != nil {
					return fmt.Errorf("gc: sweep the log's chunks: %w", err)
				}
				swept = &st
			}
			if dir := storeDir(e.opts.dir); isDir(dir) {
				c, err := sdk.Collect(e.ctx, k, dirfs.New(dirfs.Config{Store: dir}), grace)
				if err != nil {
					return fmt.Errorf("gc: collect checkpoints of %s: %w", dir, err)
				}
				collected = &c
			}
		}
		if e.opts.json {
			out := map[string]any{"dry_run": dryRun, "matched": len(old), "deleted": nonNil(deleted)}
			if dryRun {
				ids := make([]string, len(old))
				for i, info := range old {
					ids[i] = info.ID.String()
				}
				out["would_delete"] = ids
			}
			if len(failed) > 0 {
				out["failed"] = failed
			}
			if collected != nil {
				out["collected"] = map[string]any{"checkpoints": collected.Checkpoints, "workspaces": collected.Resources, "bytes": collected.Bytes}
			}
			if swept != nil {
				out["chunks_removed"] = swept.Removed
			}
			if err := writeJSON(e.stdout, out); err != nil {
				return err
			}
		} else {
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			for _, info := range old {
				if dryRun || slices.Contains(deleted, info.ID.String()) {
					fmt.Fprintf(e.stdout, "%s %s (%s, %s, last event %s)\n", verb, info.ID, info.Agent, info.Status, timeText(info.Updated))
				}
			}
			n := len(deleted)
			if dryRun {
				n = len(old)
			}
			fmt.Fprintf(e.stdout, "%s %d of the executions with status %s older than %s\n", verb, n, statusList(f.Status), age)
			if swept != nil && swept.Removed > 0 {
				fmt.Fprintf(e.stdout, "log: removed %d chunks of long records no kept event uses (%s)\n", swept.Removed, bytesText(swept.BytesFreed))
			}
			if collected != nil {
				fmt.Fprintf(e.stdout, "workspace store: removed %d checkpoints and %d workspaces no kept execution can use (%s of contents)\n",
					collected.Checkpoints, collected.Resources, bytesText(collected.Bytes))
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("gc: %d executions could not be deleted:\n  %s", len(failed), strings.Join(failed, "\n  "))
		}
		return nil
	})
}

func statusList(ss []eventlog.Status) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, ",")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// usage is what du reports of one execution: its own events (after its
// fork point) and the bytes the store keeps for them and their index
// entries, how many events it shares with its ancestors (stored once, by
// them), and the checkpoints its own events captured. A deleted execution
// still listed keeps a prefix that surviving forks read.
type usage struct {
	ID           string `json:"id"`
	Agent        string `json:"agent,omitempty"`
	Status       string `json:"status"`
	OwnEvents    uint64 `json:"own_events"`
	Bytes        int64  `json:"bytes"`
	SharedPrefix uint64 `json:"shared_prefix_events"`
	Checkpoints  int    `json:"checkpoints"`
}

// cmdDu reports where the log's space goes, per execution.
func cmdDu(e *env) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		var ur eventlog.UsageReporter
		if !eventlog.As(s, &ur) {
			return fmt.Errorf("du: this store (%T) does not report what executions take", s)
		}
		var all []usage
		var total usage
		for u, err := range ur.Usage(e.ctx) {
			if err != nil {
				return fmt.Errorf("usage: %w", err)
			}
			row := usage{ID: u.ID.String(), OwnEvents: u.Events, Bytes: u.Bytes, Status: "deleted (kept for forks)"}
			if !u.Deleted {
				info, err := s.Info(e.ctx, u.ID)
				if err != nil {
					return err
				}
				row.Agent, row.Status, row.SharedPrefix = info.Agent, info.Status.String(), info.ForkSeq
				for ev, err := range s.Events(e.ctx, u.ID, info.ForkSeq+1) {
					if err != nil {
						return fmt.Errorf("read %s: %w", u.ID, err)
					}
					if _, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
						row.Checkpoints++
					}
				}
			} else if u.Events == 0 {
				continue // nothing kept but its header
			}
			total.OwnEvents += row.OwnEvents
			total.Bytes += row.Bytes
			total.Checkpoints += row.Checkpoints
			all = append(all, row)
		}
		var chunks int
		var chunkBytes int64
		if cu, ok := s.(chunkCounter); ok {
			var err error
			if chunks, chunkBytes, err = cu.ChunkUsage(e.ctx); err != nil {
				return err
			}
		}
		if e.opts.json {
			if all == nil {
				all = []usage{}
			}
			return writeJSON(e.stdout, map[string]any{"executions": all, "chunks": map[string]any{"count": chunks, "bytes": chunkBytes},
				"total": map[string]any{"events": total.OwnEvents, "bytes": total.Bytes + chunkBytes, "checkpoints": total.Checkpoints}})
		}
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "ID\tAGENT\tSTATUS\tOWN EVENTS\tBYTES\tSHARED PREFIX\tCHECKPOINTS")
		for _, u := range all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\n", u.ID, u.Agent, u.Status, u.OwnEvents, bytesText(u.Bytes), u.SharedPrefix, u.Checkpoints)
		}
		if chunks > 0 {
			fmt.Fprintf(tw, "chunks\t\t%d shared chunks of long records\t\t%s\t\t\n", chunks, bytesText(chunkBytes))
		}
		fmt.Fprintf(tw, "total\t\t\t%d\t%s\t\t%d\n", total.OwnEvents, bytesText(total.Bytes+chunkBytes), total.Checkpoints)
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "(bytes: the stored events and index entries of each execution's own part; a fork reads its shared prefix from its ancestors)")
		return nil
	})
}

// bytesText writes n bytes for people (KiB, MiB…).
func bytesText(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// isDir reports whether p is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// sweeper is a store that keeps chunks of long records, which gc sweeps
// after deleting (pebblestore).
type sweeper interface {
	Sweep(ctx context.Context) (pebblestore.SweepStats, error)
}

// chunkCounter is a store that can say what its shared chunks take.
type chunkCounter interface {
	ChunkUsage(ctx context.Context) (int, int64, error)
}
