package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

// now is the clock of the events the command writes; tests replace it.
var now = time.Now

// forkEdit is what the fork command's flags ask of the fork (DESIGN §12).
type forkEdit struct {
	input          string   // --input JSON; "" for none
	results        []string // --result STEPID=JSON, each as given
	resultFiles    []string // --result-file STEPID=FILE, each as given
	toolArgs       []toolArgsEdit
	notJSON        []string // steps of --result-file whose file is not JSON (set by options)
	requireCovered bool     // --require-covered
	latestCovered  bool     // --latest-covered: fork at the newest covered seq at or before <seq> (default: the head)
	noVerify       bool     // --no-verify: skip the check of the prefix's records (sdk.VerifyPrefix)
	version        *string  // --version V: move the fork onto code version V (sdk.OnVersion); nil: the parent's
}

// setVersion is the --version flag: "" (given) makes the fork unversioned.
func (f *forkEdit) setVersion(v string) error {
	if err := eventlog.CheckVersionName(v); err != nil {
		return err
	}
	f.version = &v
	return nil
}

// addResult is the --result flag: it may be given many times.
func (f *forkEdit) addResult(v string) error {
	f.results = append(f.results, v)
	return nil
}

// addResultFile is the --result-file flag: it may be given many times.
func (f *forkEdit) addResultFile(v string) error {
	f.resultFiles = append(f.resultFiles, v)
	return nil
}

// toolArgsEdit is one --edit-tool-args STEPID TOOL key=value…: the
// arguments of one tool call in the recorded reply of LLM call step.
type toolArgsEdit struct {
	step, tool string
	args       []string
}

// editToolArgsFlag is the flag that takes several words.
const editToolArgsFlag = "edit-tool-args"

// takeToolArgs removes each --edit-tool-args STEPID TOOL key=value… from
// args (before any "--") into f, and returns the rest for the flag parser:
// the flag takes its STEPID and TOOL, then every following word that holds
// an "=" and does not start with "-".
func (f *forkEdit) takeToolArgs(args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), nil
		}
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || name != editToolArgsFlag && !strings.HasPrefix(name, editToolArgsFlag+"=") {
			rest = append(rest, a)
			continue
		}
		var words []string
		if v, ok := strings.CutPrefix(name, editToolArgsFlag+"="); ok {
			words = append(words, v)
		}
		for len(words) < 2 && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			words = append(words, args[i])
		}
		if len(words) < 2 {
			return nil, inputErrorf("fork: --%s: want STEPID TOOL key=value…", editToolArgsFlag)
		}
		e := toolArgsEdit{step: words[0], tool: words[1]}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && strings.Contains(args[i+1], "=") {
			i++
			e.args = append(e.args, args[i])
		}
		if len(e.args) == 0 {
			return nil, inputErrorf("fork: --%s %s %s: want at least one key=value (a string) or key:=JSON after the tool",
				editToolArgsFlag, clip(e.step, 64), clip(e.tool, 64))
		}
		f.toolArgs = append(f.toolArgs, e)
	}
	return rest, nil
}

// options turns the flags into sdk fork options, refusing JSON that does
// not parse.
func (f *forkEdit) options() ([]sdk.ForkOption, error) {
	var opts []sdk.ForkOption
	if f.input != "" {
		if !json.Valid([]byte(f.input)) {
			return nil, inputErrorf("fork: --input %q is not JSON", clip(f.input, 64))
		}
		opts = append(opts, sdk.WithInput(json.RawMessage(f.input)))
	}
	for _, r := range f.results {
		step, value, ok := strings.Cut(r, "=")
		if !ok || step == "" {
			return nil, inputErrorf("fork: --result %q: want STEPID=JSON", clip(r, 64))
		}
		if !json.Valid([]byte(value)) {
			return nil, inputErrorf("fork: --result %s: %q is not JSON", clip(step, 64), clip(value, 64))
		}
		opts = append(opts, sdk.WithResult(step, json.RawMessage(value)))
	}
	for _, r := range f.resultFiles {
		step, file, ok := strings.Cut(r, "=")
		if !ok || step == "" || file == "" {
			return nil, inputErrorf("fork: --result-file %q: want STEPID=FILE", clip(r, 64))
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, inputErrorf("fork: --result-file %s: %v", clip(step, 64), err)
		}
		// The file's bytes are the result as is: an LLM call's response
		// body (JSON or not), or a step's JSON result. A file that is not
		// JSON can only be a response body: cmdFork checks the step is an
		// LLM call once the lineage is read (notJSON).
		if json.Valid(b) {
			opts = append(opts, sdk.WithResult(step, json.RawMessage(b)))
		} else {
			opts = append(opts, sdk.WithResult(step, b))
			f.notJSON = append(f.notJSON, step)
		}
	}
	for _, t := range f.toolArgs {
		var args []fork.ToolArg
		for _, kv := range t.args {
			a, err := fork.ParseToolArg(kv)
			if err != nil {
				return nil, &inputError{fmt.Errorf("fork: --%s %s %s: %w", editToolArgsFlag, clip(t.step, 64), clip(t.tool, 64), err)}
			}
			args = append(args, a)
		}
		opts = append(opts, sdk.WithToolArgs(t.step, t.tool, args...))
	}
	if f.requireCovered {
		opts = append(opts, sdk.RequireCovered())
	}
	if f.version != nil {
		opts = append(opts, sdk.OnVersion(*f.version))
	}
	if !f.noVerify {
		opts = append(opts, sdk.VerifyPrefix())
	}
	return opts, nil
}

// checkInput reports whether input decodes into the input type of agent,
// for the agents whose code the command has (the demo's coder agent), as
// the kernel that runs it will decode it: strictly, and null refused (a
// struct has none). Other agents' inputs are checked by the program that
// registers them, when it runs the fork.
func checkInput(agent string, input []byte) error {
	switch agent {
	case coderAgent:
		return decodeStrict[coder.Input](agent, input)
	}
	return nil
}

// decodeStrict decodes input into a T as the kernel does: no unknown
// field, nothing after the value, and no null.
func decodeStrict[T any](agent string, input []byte) error {
	var v T
	if string(bytes.TrimSpace(input)) == "null" {
		return fmt.Errorf("agent %s takes a %T, which has no null", agent, v)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("agent %s takes a %T: %v", agent, v, err)
	}
	if dec.More() {
		return fmt.Errorf("agent %s takes a %T: data after the value", agent, v)
	}
	return nil
}

// checkBodies refuses a --result-file that is not JSON for a step of id's
// lineage that is not an LLM call: only a response body may be any bytes.
// A step the lineage never ran is left to the kernel, which says so.
func checkBodies(e *env, s logStore, id eventlog.ID, steps []string) error {
	if len(steps) == 0 {
		return nil
	}
	kinds := map[string]eventlog.StepKind{}
	for ev, err := range s.Events(e.ctx, id, 1) {
		if err != nil {
			return err
		}
		if p, ok := ev.Data.(*eventlog.StepStarted); ok {
			kinds[p.StepID] = p.StepKind
		}
	}
	for _, step := range steps {
		if k, ok := kinds[step]; ok && k != eventlog.StepLLM {
			return inputErrorf("fork: --result-file %s: the file is not JSON, and step %s is a %s step, whose result is JSON (only an LLM call's response body may be any bytes)",
				clip(step, 64), clip(step, 64), k)
		}
	}
	return nil
}

// cmdClock is the kernel clock of the commands that write: now.
type cmdClock struct{}

func (cmdClock) Now() time.Time                         { return now() }
func (cmdClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func cmdFork(e *env, idArg, seqArg string, edit forkEdit) error {
	opts, err := edit.options()
	if err != nil {
		return err
	}
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		if err := checkBodies(e, s, info.ID, edit.notJSON); err != nil {
			return err
		}
		if edit.input != "" {
			if err := checkInput(info.Agent, []byte(edit.input)); err != nil {
				return inputErrorf("fork: --input %s: %v", clip(edit.input, 64), err)
			}
		}
		var seq uint64
		switch {
		case seqArg != "":
			if seq, err = parseSeq(seqArg, info); err != nil {
				return err
			}
		case !edit.latestCovered:
			return inputErrorf("fork: want <seq>, or --latest-covered to fork at the newest covered event")
		default:
			seq = info.Head
		}
		if edit.latestCovered {
			// The way out for an execution awaiting an owner that never
			// returns (DESIGN §15½.4): every resource restores exactly.
			covered, err := coverage.LatestCovered(e.ctx, s, info.ID, seq)
			if errors.Is(err, coverage.ErrUncovered) {
				return &inputError{fmt.Errorf("fork: %w: no event of %s at or before seq %d is covered", err, info.ID, seq)}
			}
			if err != nil {
				return err
			}
			seq = covered
		}
		id, plan, err := forkWith(e, s, info.ID, seq, opts)
		if err != nil {
			return err
		}
		p, err := withInFlight(e, s, info.ID, coverage.Point{Seq: plan.At, Covered: plan.Covered, Resources: plan.Selections})
		if err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{
				"id": id.String(), "parent": plan.Parent.String(), "at": plan.At, "plan": pointOut(p, ""),
			})
		}
		fmt.Fprintf(e.stdout, "created fork %s of %s at seq %d (agent %s)\n", id, info.ID, seq, info.Agent)
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

// forkWith forks parent at seq through the SDK (which encodes the edits as
// a kernel running the agent would) and returns the plan the fork recorded.
// An edit the lineage does not allow, or an uncovered point under
// --require-covered, is bad input: nothing was written.
func forkWith(e *env, s logStore, parent eventlog.ID, seq uint64, opts []sdk.ForkOption) (eventlog.ID, fork.Plan, error) {
	k, err := sdk.New(s, sdk.WithClock(cmdClock{}))
	if err != nil {
		return eventlog.ID{}, fork.Plan{}, err
	}
	id, err := k.Fork(e.ctx, parent, seq, opts...)
	switch {
	case errors.Is(err, eventlog.ErrInvalid):
		return eventlog.ID{}, fork.Plan{}, &inputError{err}
	case errors.Is(err, sdk.ErrUncovered):
		return eventlog.ID{}, fork.Plan{}, &inputError{fmt.Errorf("%w (forkline coverage %s %d shows why; drop --require-covered to fork anyway)", err, parent, seq)}
	case err != nil:
		return eventlog.ID{}, fork.Plan{}, err
	}
	for ev, err := range s.Events(e.ctx, id, seq+1) {
		if err != nil {
			return eventlog.ID{}, fork.Plan{}, err
		}
		fc, ok := ev.Data.(*eventlog.ForkCreated)
		if !ok {
			break
		}
		plan := fork.Plan{Parent: fc.Parent, At: fc.At, Covered: true}
		for _, sel := range fc.Selections {
			plan.Covered = plan.Covered && sel.Covered
			plan.Selections = append(plan.Selections, coverage.Selection{Key: sel.Key, Ref: sel.Ref,
				CapturedAt: sel.CapturedAt, Generation: sel.Generation, Covered: sel.Covered})
		}
		return id, plan, nil
	}
	return eventlog.ID{}, fork.Plan{}, fmt.Errorf("fork %s: no fork.created at seq %d", id, seq+1)
}
