package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

// demoEdit is the demo's edited fork: the LLM reply of step StepID asked
// for write_file(From); the fork replays it asking for write_file(To).
type demoEdit struct {
	StepID string `json:"step_id"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// editPoint is an LLM reply that asks for a write_file call.
type editPoint struct {
	seq    uint64 // the reply's step.succeeded
	stepID string
	callID string // the ID of its first write_file call
	path   string // that call's path
}

// errNoEditPoint is returned by pickEditPoint for a run whose model never
// asked for a write_file call.
var errNoEditPoint = errors.New("no LLM reply asks for write_file")

// pickEditPoint chooses the LLM reply the demo's edited fork changes: of
// the replies that ask for write_file, the newest where no write ran
// between the checkpoint a fork there restores and the reply, so that the
// restored workspace is the parent's at the fork point and the diff shows
// only what the edit changed; else the newest reply that asks for one.
func pickEditPoint(l *lineage) (editPoint, error) {
	var best, fallback editPoint
	ws := writes(l, l.info.Head)
	for _, ev := range l.events {
		done, ok := ev.Data.(*eventlog.StepSucceeded)
		if !ok {
			continue
		}
		start := l.steps[done.StepID]
		if start == nil || start.StepKind != eventlog.StepLLM {
			continue
		}
		body, ok := replyBody(done.Result)
		if !ok {
			continue
		}
		p, callID, ok := firstWrite(body)
		if !ok {
			continue
		}
		pt := editPoint{seq: ev.Seq, stepID: done.StepID, callID: callID, path: p}
		fallback = pt
		cp, err := l.cov.Point(ev.Seq)
		if err != nil {
			return editPoint{}, err
		}
		var since uint64
		for _, r := range cp.Resources {
			if r.Key == workspaceKey {
				since = r.CapturedAt
			}
		}
		exact := true
		for _, w := range ws {
			if w.done > since && w.done <= ev.Seq {
				exact = false
			}
		}
		if exact {
			best = pt
		}
	}
	switch {
	case best.seq > 0:
		return best, nil
	case fallback.seq > 0:
		return fallback, nil
	}
	return editPoint{}, errNoEditPoint
}

// firstWrite returns the path of the first write_file call a reply's body
// asks for (a chat completion, whole or streamed: fork.ToolCalls), and the
// call's ID, which names it to sdk.WithToolArgs.
func firstWrite(body []byte) (path, callID string, ok bool) {
	calls, err := fork.ToolCalls(body)
	if err != nil {
		return "", "", false
	}
	for _, c := range calls {
		var a struct {
			Path string `json:"path"`
		}
		if c.Name == "write_file" && json.Unmarshal(c.Args, &a) == nil && a.Path != "" {
			return a.Path, c.ID, true
		}
	}
	return "", "", false
}

// replyBody returns the HTTP body of a recorded LLM call's result, as the
// model sent it, and false if result is not one.
func replyBody(result []byte) ([]byte, bool) {
	var r struct {
		Status int    `json:"status"`
		Body   []byte `json:"body"`
	}
	if json.Unmarshal(result, &r) != nil || r.Status == 0 || len(r.Body) == 0 {
		return nil, false
	}
	return r.Body, true
}

// editedName is the file name the edited reply writes instead of p:
// greet.go becomes greet_edited.go.
func editedName(p string) string {
	ext := path.Ext(p)
	if ext == path.Base(p) { // a dot file such as .env
		ext = ""
	}
	return strings.TrimSuffix(p, ext) + "_edited" + ext
}

// demoEditedFork forks the parent at an LLM reply that names the file the
// coder writes, with the reply edited to name another file
// (sdk.WithToolArgs: the path argument of that write_file call), runs the fork, and prints `forkline diff` of parent
// and fork.
func demoEditedFork(e *env, out io.Writer, ck *coderKernel, parent *lineage, parentFinal files) (demoFork, error) {
	pt, err := pickEditPoint(parent)
	if err != nil {
		return demoFork{}, fmt.Errorf("execution %s: %w", parent.info.ID, err)
	}
	to := editedName(pt.path)
	toJSON, err := json.Marshal(to)
	if err != nil {
		return demoFork{}, err
	}
	fmt.Fprintf(out, "the LLM reply of step %s asks for write_file(%s); the fork replays it asking for write_file(%s)\n", pt.stepID, pt.path, to)
	f, err := demoForkAt(e, out, ck, parent, parentFinal, pt.seq, sdk.WithToolArgs(pt.stepID, pt.callID, fork.ToolArg{Key: "path", Value: toJSON}))
	if err != nil {
		return demoFork{}, err
	}
	f.Edit = &demoEdit{StepID: pt.stepID, From: pt.path, To: to}
	fid, err := eventlog.ParseID(f.ID)
	if err != nil {
		return demoFork{}, err
	}
	c, res, err := compareExecutions(e.ctx, ck.store, parent.info.ID, fid, map[string]driver.Differ{dirfs.ID: ck.drv})
	if err != nil {
		return demoFork{}, err
	}
	f.Diff = &diffJSON{Comparison: c, Resources: res}
	fmt.Fprintf(out, "\nforkline%s diff %s %s:\n", dirFlag(e), parent.info.ID, fid)
	if err := writeDiffTable(out, c, res); err != nil {
		return demoFork{}, err
	}
	return f, nil
}
