package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/forkline/forkline/eventlog"
)

// DamagedClosedName is where [Reclose] keeps the clean-close record it
// replaced, for a person to look at.
const DamagedClosedName = closedName + ".damaged"

// RecloseReport is what [Reclose] read and wrote.
type RecloseReport struct {
	Executions int  // executions read whole
	Events     int  // events read, each record's checksum checked
	Replaced   bool // there was a record, kept as DamagedClosedName
}

// Reclose recovers the log in dir from a clean-close record
// (FORKLINE-CLOSED) that fails its check, when the record is what was
// damaged: it sets the record aside, opens the log read-only without it —
// every table the MANIFEST lists must exist with its size, the write-ahead
// logs pass their check — and reads every event of every execution (each
// record's checksum checked); only if all of that holds does it open the
// log for writing and close it, which writes a new record from the
// MANIFEST. Otherwise the record is put back and the error returned. The
// replaced record stays in DamagedClosedName.
//
// What it cannot tell: the record is the only witness of a MANIFEST that
// lost a version edit (whole tables dropped from the log). If that was the
// damage, what the MANIFEST lost stays lost; Reclose accepts the log as
// the MANIFEST has it. The log must not be open elsewhere.
func Reclose(ctx context.Context, dir string) (RecloseReport, error) {
	var rep RecloseReport
	rec, aside := filepath.Join(dir, closedName), filepath.Join(dir, DamagedClosedName)
	switch err := os.Rename(rec, aside); {
	case err == nil:
		rep.Replaced = true
	case errors.Is(err, fs.ErrNotExist):
	default:
		return rep, fmt.Errorf("pebblestore: reclose %s: %w", dir, err)
	}
	restore := func(err error) (RecloseReport, error) {
		if rep.Replaced {
			if rerr := os.Rename(aside, rec); rerr != nil {
				err = fmt.Errorf("%w (and putting %s back failed: %v)", err, closedName, rerr)
			}
		}
		return RecloseReport{}, fmt.Errorf("pebblestore: reclose %s: %w", dir, err)
	}
	ro, err := Open(dir, ReadOnly())
	if err != nil {
		return restore(err)
	}
	err = readEverything(ctx, ro, &rep)
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return restore(err)
	}
	rw, err := Open(dir)
	if err != nil {
		return restore(err)
	}
	if err := rw.Close(); err != nil {
		return rep, fmt.Errorf("pebblestore: reclose %s: %w", dir, err)
	}
	return rep, nil
}

// readEverything reads every event of every execution of s.
func readEverything(ctx context.Context, s *Store, rep *RecloseReport) error {
	for info, err := range s.List(ctx, eventlog.Filter{}) {
		if err != nil {
			return err
		}
		rep.Executions++
		for _, err := range s.Events(ctx, info.ID, 1) {
			if err != nil {
				return err
			}
			rep.Events++
		}
	}
	return nil
}
