package main

import (
	"fmt"
	"os"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/fork"
)

// now is the clock of the events the command writes; tests replace it.
var now = time.Now

func cmdFork(e *env, idArg, seqArg string) error {
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		seq, err := parseSeq(seqArg, info)
		if err != nil {
			return err
		}
		id, plan, err := fork.Create(e.ctx, s, info.ID, seq, now())
		if err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{
				"id": id.String(), "parent": plan.Parent.String(), "at": plan.At,
				"plan": pointOut(coverage.Point{Seq: plan.At, Covered: plan.Covered, Resources: plan.Selections}, ""),
			})
		}
		fmt.Fprintf(e.stdout, "created fork %s of %s at seq %d (agent %s)\n", id, info.ID, seq, info.Agent)
		p := coverage.Point{Seq: plan.At, Covered: plan.Covered, Resources: plan.Selections}
		if err := writePoint(e.stdout, p, "the fork point"); err != nil {
			return err
		}
		if info.Agent == coderAgent {
			fmt.Fprintf(e.stdout, "run it with: forkline%s run %s\n", dirFlag(e), id)
		} else {
			fmt.Fprintf(e.stdout, "run it with the program that registers agent %q (sdk.Kernel.Run)\n", info.Agent)
		}
		return nil
	})
}

// dirFlag is the --dir (and --db) flag to repeat in a suggested command
// line, or "" for the default folder (and $FORKLINE_DB).
func dirFlag(e *env) string {
	out := ""
	if e.opts.dir != defaultDir {
		out = " --dir " + e.opts.dir
	}
	if e.opts.db != "" && e.opts.db != os.Getenv("FORKLINE_DB") {
		out += " --db " + redactURL(e.opts.db)
	}
	return out
}
