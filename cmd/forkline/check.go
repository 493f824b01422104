package main

import (
	"fmt"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/proptest"
	"github.com/forkline/forkline/sdk"
)

// errDiverged is the failure of a check that found divergences.
var errDiverged = fmt.Errorf("recorded executions diverge from the current code")

// cmdCheck replays every recorded execution of the coder agent in the data
// folder against the current code (proptest.ReplayLog): read-only, no body
// runs, nothing is written to the log.
func cmdCheck(e *env, agent string, pos []string) error {
	if agent != coderAgent {
		return inputErrorf("check: --agent %q: the command has the code of the demo's coder agent only (--agent coder); "+
			"check another agent with proptest.ReplayLog in the program that registers it", agent)
	}
	if len(pos) == 1 {
		e.opts.dir = pos[0]
	}
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		name, stream, err := recordedModel(e, s)
		if err != nil {
			return err
		}
		// Recorded bodies never run, so the model's endpoint is never
		// called and the workspace store never touched; the model's name
		// is part of every LLM call's identity, so it is the recorded one.
		m := coder.Model{Name: name, BaseURL: "http://replay.invalid/v1", APIKey: "replay", Stream: stream}
		newDriver := func() driver.Driver[*dirfs.Workspace, dirfs.Binding] {
			return dirfs.New(dirfs.Config{Store: storeDir(e.opts.dir)})
		}
		newKernel := func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
			k, err := sdk.New(log, opts...)
			if err != nil {
				return nil, err
			}
			_, err = sdk.Register(k, coderAgent, coder.Handler(newDriver, m))
			return k, err
		}
		rep, err := proptest.ReplayLog(e.ctx, s, newKernel)
		if err != nil {
			return err
		}
		if e.opts.json {
			divs := make([]map[string]any, len(rep.Divergences))
			for i, d := range rep.Divergences {
				divs[i] = map[string]any{"id": d.Execution.String(), "agent": d.Agent, "seq": d.Seq, "reason": d.Reason}
			}
			skipped := rep.Skipped
			if skipped == nil {
				skipped = []string{}
			}
			if err := writeJSON(e.stdout, map[string]any{"model": name, "replayed": rep.Replayed, "skipped": skipped, "divergences": divs}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.stdout, "forkline check: replayed %d execution(s) of agent %s (model %s) against the current code; read-only, nothing written\n",
				rep.Replayed, coderAgent, name)
			for _, s := range rep.Skipped {
				fmt.Fprintf(e.stdout, "  skipped   %s\n", s)
			}
			for _, d := range rep.Divergences {
				fmt.Fprintf(e.stdout, "  DIVERGES  %s at seq %d: %s\n", d.Execution, d.Seq, d.Reason)
			}
			fmt.Fprintf(e.stdout, "%d divergence(s)\n", len(rep.Divergences))
		}
		if len(rep.Divergences) > 0 {
			return errDiverged
		}
		return nil
	})
}

// recordedModel is the model name of the log's first recorded LLM call of
// the coder agent and whether it streamed, or the scripted model's, streamed
// as a new run's is, when there is none.
func recordedModel(e *env, s eventlog.Log) (string, bool, error) {
	for info, err := range s.List(e.ctx, eventlog.Filter{Agent: coderAgent}) {
		if err != nil {
			return "", false, err
		}
		for ev, err := range s.Events(e.ctx, info.ID, 1) {
			if err != nil {
				return "", false, err
			}
			if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepKind == eventlog.StepLLM {
				return p.Target, recordedStream(p), nil
			}
		}
	}
	return coder.ScriptedName, true, nil
}
