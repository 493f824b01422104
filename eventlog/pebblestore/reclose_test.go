package pebblestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// closedLog writes a log of two executions in a folder and closes it
// cleanly; it returns the folder and what the log holds.
func closedLog(t *testing.T) (string, map[eventlog.ID][]eventlog.Event) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	held := map[eventlog.ID][]eventlog.Event{}
	for _, agent := range []string{"a", "b"} {
		id := create(t, s, agent)
		appendAll(t, s, id, withSeqs(2, dispatch(1), started("s1", eventlog.StepTool), succeeded("s1"))...)
		held[id] = events(t, s, id, 1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, held
}

// TestRecloseFlippedRecord: a byte flipped in FORKLINE-CLOSED (its header,
// a table's size) blocks every Open with ErrCorrupt whose message names
// the check that failed, the record, and the command that recovers;
// Reclose then re-verifies the log without the record, rewrites it, keeps
// the damaged one aside, and the log opens with every event as it was.
func TestRecloseFlippedRecord(t *testing.T) {
	for _, c := range []struct {
		name  string
		flip  func(b []byte) int // the offset to flip
		check string
	}{
		{"header", func([]byte) int { return 0 }, "parse check"},
		{"a table's size", func(b []byte) int { return strings.LastIndex(string(b[:strings.Index(string(b), "\nend")]), " ") + 1 }, "clean-close record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, held := closedLog(t)
			rec := filepath.Join(dir, "FORKLINE-CLOSED")
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			b[c.flip(b)] ^= 0x01
			if err := os.WriteFile(rec, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, opts := range [][]pebblestore.Option{{pebblestore.ReadOnly()}, nil} {
				s, err := pebblestore.Open(dir, opts...)
				if err == nil {
					_ = s.Close()
					t.Fatalf("Open(%v) of a log whose record is flipped succeeded", opts)
				}
				msg := err.Error()
				if !errors.Is(err, eventlog.ErrCorrupt) || !strings.Contains(msg, "FORKLINE-CLOSED") ||
					!strings.Contains(msg, c.check) || !strings.Contains(msg, "forkline reclose") {
					t.Fatalf("Open(%v) = %v; want ErrCorrupt naming the record, the check (%q) and forkline reclose", opts, err, c.check)
				}
			}
			rep, err := pebblestore.Reclose(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep != (pebblestore.RecloseReport{Executions: 2, Events: 8, Replaced: true}) {
				t.Errorf("Reclose = %+v, want 2 executions, 8 events, a record replaced", rep)
			}
			if kept, err := os.ReadFile(filepath.Join(dir, pebblestore.DamagedClosedName)); err != nil || string(kept) != string(b) {
				t.Errorf("the damaged record was not kept aside (%v)", err)
			}
			s, err := pebblestore.Open(dir, pebblestore.ReadOnly())
			if err != nil {
				t.Fatalf("Open after Reclose: %v", err)
			}
			defer s.Close()
			for id, want := range held {
				if got := events(t, s, id, 1); !eventsEqual(got, want) {
					t.Errorf("after Reclose %s holds %s", id, diff(want, got))
				}
			}
		})
	}
}

// TestRecloseRefusesDamagedLog: when the log itself is damaged (a table
// cut short), Reclose fails with ErrCorrupt, puts the record back and
// writes nothing.
func TestRecloseRefusesDamagedLog(t *testing.T) {
	dir, _ := closedLog(t)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("the closed log has no table")
	}
	if err := os.Truncate(tables[0], 10); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, "FORKLINE-CLOSED"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pebblestore.Reclose(context.Background(), dir); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("Reclose of a damaged log = %v, want ErrCorrupt", err)
	}
	if now, err := os.ReadFile(filepath.Join(dir, "FORKLINE-CLOSED")); err != nil || string(now) != string(rec) {
		t.Fatalf("Reclose did not put the record back (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, pebblestore.DamagedClosedName)); !os.IsNotExist(err) {
		t.Fatalf("a refused Reclose left %s (%v)", pebblestore.DamagedClosedName, err)
	}
}
