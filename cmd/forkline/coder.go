package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/forkline/forkline/sdk"
)

// coderAgent is the name the demo registers the coder agent under.
const coderAgent = "coder"

// workspaceKey is the coder agent's resource key.
const workspaceKey = "workspace"

// defaultTask is the demo's task for the coder agent.
const defaultTask = "Build a tiny Go module that greets people: a library, a test, a command, a README."

// defaultBaseURL is the endpoint of a real model when OPENAI_BASE_URL is unset.
const defaultBaseURL = "https://api.openai.com/v1"

// model is the coder agent's model for one command.
type model struct {
	coder.Model
	scripted bool
	stop     func() error // stops the scripted model's server
}

func (m *model) close() {
	if m.stop != nil {
		_ = m.stop()
	}
}

// describe says plainly which model is used.
func (m *model) describe() string {
	if m.scripted {
		return fmt.Sprintf("built-in scripted model %q (deterministic; LLM_MODEL is not set), "+
			"served over HTTP on loopback with the OpenAI chat-completions wire format", m.Name)
	}
	return fmt.Sprintf("real model %q at %s (from LLM_MODEL and OPENAI_BASE_URL)", m.Name, m.BaseURL)
}

// modelFromEnv is the real model when LLM_MODEL is set, otherwise the
// scripted one served on a fresh loopback port.
func modelFromEnv() (*model, error) {
	return serveModel(chooseModel(nil))
}

// chooseModel is the model a coder lineage runs on whose first recorded
// LLM call is first (nil: none yet), without serving the scripted one
// (its BaseURL is then ""): with no call yet, the real model when
// LLM_MODEL is set (at OPENAI_BASE_URL, streamed), otherwise the scripted
// one, streamed; with one, the recorded model asked the way it recorded
// (see modelFor).
func chooseModel(first *eventlog.StepStarted) (m coder.Model, scripted bool) {
	base := os.Getenv("OPENAI_BASE_URL")
	if base == "" {
		base = defaultBaseURL
	}
	if first == nil {
		if name := os.Getenv("LLM_MODEL"); name != "" {
			return coder.Model{Name: name, BaseURL: base, APIKey: os.Getenv("OPENAI_API_KEY"), Stream: true}, false
		}
		return coder.Model{Name: coder.ScriptedName, APIKey: "scripted", Stream: true}, true
	}
	if first.Target != coder.ScriptedName {
		return coder.Model{Name: first.Target, BaseURL: base, APIKey: os.Getenv("OPENAI_API_KEY"), Stream: recordedStream(first)}, false
	}
	return coder.Model{Name: coder.ScriptedName, APIKey: "scripted", Stream: recordedStream(first)}, true
}

// serveModel is m as a model of one command: the scripted one served on a
// fresh loopback port.
func serveModel(m coder.Model, isScripted bool) (*model, error) {
	if isScripted {
		return scripted(m.Stream)
	}
	return &model{Model: m}, nil
}

// scripted serves the built-in scripted model on a fresh loopback port,
// its replies streamed or whole as the coder asks: its answers are paced
// (scriptChunkDelay between streamed chunks) so that a person sees them
// arrive.
func scripted(stream bool) (*model, error) {
	base, stop, err := serveScript()
	if err != nil {
		return nil, err
	}
	return &model{Model: coder.Model{Name: coder.ScriptedName, BaseURL: base, APIKey: "scripted", Stream: stream}, scripted: true, stop: stop}, nil
}

// serveScript serves the coder's script (coder.Script, paced) on a fresh
// loopback port and returns its base URL and what stops it.
func serveScript() (string, func() error, error) {
	script := coder.Script()
	script.ChunkDelay = scriptChunkDelay
	return scriptedmodel.Serve(script)
}

// scriptChunkDelay paces the scripted model's streamed chunks.
const scriptChunkDelay = 2 * time.Millisecond

// recordedStream reports whether a recorded LLM call was made streamed
// (its request asked for "stream": true): a lineage replays only with the
// coder asking the way it recorded.
func recordedStream(s *eventlog.StepStarted) bool {
	var req struct {
		Body struct {
			Stream bool `json:"stream"`
		} `json:"body"`
	}
	return json.Unmarshal(s.Args, &req) == nil && req.Body.Stream
}

// modelFor is the model a recorded coder lineage was run with, so that its
// recorded LLM calls replay: a call's identity is the model, the path and
// the request (streamed or not, as recorded), not the endpoint's host, so the scripted model may be
// served on any loopback port, and a real model is the recorded model name
// at the endpoint of the environment. A lineage with no LLM call yet takes
// the model from the environment.
func modelFor(l *lineage) (*model, error) {
	return serveModel(chooseModel(firstLLMCall(l.events)))
}

// firstLLMCall is the step.started of the first LLM call among evs, nil
// for none.
func firstLLMCall(evs []eventlog.Event) *eventlog.StepStarted {
	for _, ev := range evs {
		if s, ok := ev.Data.(*eventlog.StepStarted); ok && s.StepKind == eventlog.StepLLM {
			return s
		}
	}
	return nil
}

// ownerOptions names the kernel of a command that runs executions: on a
// data folder, sdk.WithLocalOwner of its log, so that a run resumed after a
// crash is the same owner and reopens its workspace (DESIGN §11); on
// Postgres the default, one owner per process.
func ownerOptions(e *env) []sdk.Option {
	if e.opts.db != "" {
		return nil
	}
	return []sdk.Option{sdk.WithLocalOwner(logDir(e.opts.dir))}
}

// coderKernel is a kernel on the data folder's log with the coder agent
// registered on a dirfs store.
type coderKernel struct {
	k     *sdk.Kernel
	store logStore
	drv   *dirfs.Driver // for reading workspaces and restoring checkpoints
}

func openCoderKernel(log logStore, dirfsStore string, blobs blob.Store, m *model, opts ...sdk.Option) (*coderKernel, error) {
	k, err := sdk.New(log, opts...)
	if err != nil {
		return nil, err
	}
	cfg := dirfs.Config{Store: dirfsStore, Blobs: blobs}
	newDriver := func() driver.Driver[*dirfs.Workspace, dirfs.Binding] {
		return dirfs.New(cfg)
	}
	if _, err := sdk.Register(k, coderAgent, coder.Handler(newDriver, m.Model)); err != nil {
		return nil, err
	}
	return &coderKernel{k: k, store: log, drv: dirfs.New(cfg)}, nil
}

// files is a workspace's regular files by slash path.
type files map[string]string

// readTree reads every regular file under dir.
func readTree(dir string) (files, error) {
	out := files{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}

// restored reads the files of checkpoint ref ("" = the initial environment,
// an empty workspace) by restoring it into a scratch workspace, removed
// afterwards.
func (c *coderKernel) restored(ctx context.Context, ref string) (files, error) {
	if ref == "" {
		return files{}, nil
	}
	ws, b, err := c.drv.Create(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("restore checkpoint %s: %w", shortRef(ref), err)
	}
	defer func() {
		_ = ws.Close()
		_ = c.drv.RemoveWorkspace(b)
	}()
	return readTree(ws.Dir())
}

// ownWorkspace returns the files of the workspace that execution id bound
// itself (its own resource.bound, not one inherited from a parent).
func (c *coderKernel) ownWorkspace(ctx context.Context, l *lineage) (files, error) {
	var own *eventlog.ResourceBound
	for _, ev := range l.events {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok && b.Key == workspaceKey && ev.Seq > l.info.ForkSeq {
			own = b
		}
	}
	if own == nil {
		return nil, fmt.Errorf("execution %s bound no workspace of its own", l.info.ID)
	}
	var b dirfs.Binding
	if err := json.Unmarshal(own.Binding, &b); err != nil {
		return nil, fmt.Errorf("execution %s: workspace binding: %w", l.info.ID, err)
	}
	ws, err := c.drv.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return readTree(ws.Dir())
}

// write is one recorded write_file call that succeeded.
type write struct {
	started, done uint64 // seqs of its step.started and step.succeeded
	path, content string
}

// writes lists the lineage's successful write_file calls up to seq upTo, in
// the order they completed: the recorded witness of what the workspace holds.
func writes(l *lineage, upTo uint64) []write {
	type pending struct {
		seq  uint64
		args coder.WriteArgs
	}
	started := map[string]pending{}
	var out []write
	for _, ev := range l.events {
		if ev.Seq > upTo {
			break
		}
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			var a coder.WriteArgs
			if p.StepKind == eventlog.StepTool && p.Target == "write_file" && json.Unmarshal(p.Args, &a) == nil {
				started[p.StepID] = pending{ev.Seq, a}
			}
		case *eventlog.StepSucceeded:
			if w, ok := started[p.StepID]; ok {
				out = append(out, write{started: w.seq, done: ev.Seq, path: w.args.Path, content: w.args.Content})
				delete(started, p.StepID)
			}
		case *eventlog.StepFailed, *eventlog.StepCancelled:
			// A failed write changed nothing the witness can know of.
		}
	}
	return out
}

// stateAt is the workspace the recorded writes of the lineage up to seq
// upTo produce, starting from an empty workspace.
func stateAt(l *lineage, upTo uint64) files {
	out := files{}
	for _, w := range writes(l, upTo) {
		out[filepath.ToSlash(filepath.Clean(w.path))] = w.content
	}
	return out
}

// fileDiff is one path on which two workspaces differ.
type fileDiff struct {
	Path string `json:"path"`
	What string `json:"what"` // "differs", "only in the first", "only in the second"
}

// diff lists the paths where a and b differ, sorted.
func diff(a, b files, aName, bName string) []fileDiff {
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []fileDiff
	for _, p := range sorted {
		av, aok := a[p]
		bv, bok := b[p]
		switch {
		case aok && !bok:
			out = append(out, fileDiff{p, "only in " + aName})
		case !aok && bok:
			out = append(out, fileDiff{p, "only in " + bName})
		case av != bv:
			out = append(out, fileDiff{p, "differs"})
		}
	}
	return out
}

// errNotCoder is returned by run for an execution of another agent.
var errNotCoder = errors.New("not an execution of the coder agent")
