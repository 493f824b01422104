package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
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
	body   json.RawMessage // the recorded response body
	path   string          // the path of its first write_file call
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
		body, ok := llmBody(done.Result)
		if !ok {
			continue
		}
		p, ok := firstWrite(body)
		if !ok {
			continue
		}
		pt := editPoint{seq: ev.Seq, stepID: done.StepID, body: body, path: p}
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

// chatReply is the part of a chat-completions response body the edit reads.
type chatReply struct {
	Choices []struct {
		Message struct {
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// firstWrite returns the path of the first write_file call a reply asks
// for.
func firstWrite(body []byte) (string, bool) {
	var r chatReply
	if json.Unmarshal(body, &r) != nil || len(r.Choices) == 0 {
		return "", false
	}
	for _, tc := range r.Choices[0].Message.ToolCalls {
		var a struct {
			Path string `json:"path"`
		}
		if tc.Function.Name == "write_file" && json.Unmarshal([]byte(tc.Function.Arguments), &a) == nil && a.Path != "" {
			return a.Path, true
		}
	}
	return "", false
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

// editReply returns body with the path of its first write_file call
// changed from from to to; every other field is kept as recorded.
func editReply(body []byte, from, to string) ([]byte, error) {
	var r map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("edit reply: body does not decode: %w", err)
	}
	choices, _ := r["choices"].([]any)
	if len(choices) == 0 {
		return nil, errors.New("edit reply: no choices")
	}
	choice, _ := choices[0].(map[string]any)
	msg, _ := choice["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	for _, c := range calls {
		call, _ := c.(map[string]any)
		fn, _ := call["function"].(map[string]any)
		args, _ := fn["arguments"].(string)
		if fn["name"] != "write_file" {
			continue
		}
		var a map[string]any
		ad := json.NewDecoder(strings.NewReader(args))
		ad.UseNumber()
		if ad.Decode(&a) != nil || a["path"] != from {
			continue
		}
		a["path"] = to
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("edit reply: arguments: %w", err)
		}
		fn["arguments"] = string(b)
		out, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("edit reply: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("edit reply: no write_file call of %q", from)
}

// demoEditedFork forks the parent at an LLM reply that names the file the
// coder writes, with the reply edited to name another file
// (sdk.WithResult), runs the fork, and prints `forkline diff` of parent
// and fork.
func demoEditedFork(e *env, out io.Writer, ck *coderKernel, parent *lineage, parentFinal files) (demoFork, error) {
	pt, err := pickEditPoint(parent)
	if err != nil {
		return demoFork{}, fmt.Errorf("execution %s: %w", parent.info.ID, err)
	}
	to := editedName(pt.path)
	body, err := editReply(pt.body, pt.path, to)
	if err != nil {
		return demoFork{}, fmt.Errorf("execution %s step %s: %w", parent.info.ID, pt.stepID, err)
	}
	fmt.Fprintf(out, "the LLM reply of step %s asks for write_file(%s); the fork replays it asking for write_file(%s)\n", pt.stepID, pt.path, to)
	f, err := demoForkAt(e, out, ck, parent, parentFinal, pt.seq, sdk.WithResult(pt.stepID, []byte(body)))
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
