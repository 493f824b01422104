package main

import (
	"fmt"

	"github.com/forkline/forkline/eventlog/pebblestore"
)

// cmdReclose recovers a Pebble log whose clean-close record
// (FORKLINE-CLOSED) fails its check, when the record is what was damaged
// (pebblestore.Reclose): the log is re-verified without the record — its
// tables, its write-ahead logs, every event's checksum — and only then is
// a new record written from the MANIFEST. A log that fails the check
// itself is left as it was, the error exit 1.
func cmdReclose(e *env) error {
	if e.opts.db != "" {
		return inputErrorf("reclose: the clean-close record is a Pebble log's (--dir); a Postgres log has none")
	}
	dir := logDir(e.opts.dir)
	rep, err := pebblestore.Reclose(e.ctx, dir)
	if err != nil {
		return servedWrite(e, err)
	}
	fmt.Fprintf(e.stdout, "re-verified %s without its clean-close record: %d executions, %d events read whole; wrote a new one from the MANIFEST\n",
		dir, rep.Executions, rep.Events)
	if rep.Replaced {
		fmt.Fprintf(e.stdout, "the old record is kept as %s; had the MANIFEST, not the record, lost tables, what it lost is not in the log\n",
			pebblestore.DamagedClosedName)
	}
	return nil
}
