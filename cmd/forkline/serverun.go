package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
)

// servedCoder is the coder agent as forkline serve runs it, in its Serve
// workers and for its run route: each execution on the model its lineage
// recorded, as forkline run picks it (chooseModel), the scripted one
// served by this process for all the executions that use it.
type servedCoder struct {
	log    eventlog.Log
	script string       // the base URL of the scripted model this process serves
	stop   func() error // stops it
}

// registerServedCoder registers the coder agent in k, on the dirfs store
// dirfsStore with blobs (coderStores), and serves the scripted model;
// close stops it.
func registerServedCoder(k *sdk.Kernel, dirfsStore string, blobs blob.Store) (*servedCoder, error) {
	base, stop, err := serveScript()
	if err != nil {
		return nil, fmt.Errorf("serve: the scripted model: %w", err)
	}
	c := &servedCoder{log: k.Log(), script: base, stop: stop}
	cfg := dirfs.Config{Store: dirfsStore, Blobs: blobs}
	newDriver := func() driver.Driver[*dirfs.Workspace, dirfs.Binding] { return dirfs.New(cfg) }
	_, err = sdk.Register(k, coderAgent, func(ctx context.Context, in coder.Input) (coder.Output, error) {
		info, _ := sdk.Info(ctx)
		m, _, err := c.model(ctx, info.ID)
		if err != nil {
			return coder.Output{}, err
		}
		return coder.Handler(newDriver, m)(ctx, in)
	})
	if err != nil {
		_ = stop()
		return nil, err
	}
	return c, nil
}

// close stops the scripted model.
func (c *servedCoder) close() { _ = c.stop() }

// model is the model execution id runs on: the one its first recorded LLM
// call names, asked the way it recorded; for a lineage with none yet, the
// one this process's environment names (LLM_MODEL), else the scripted one.
func (c *servedCoder) model(ctx context.Context, id eventlog.ID) (coder.Model, bool, error) {
	var first *eventlog.StepStarted
	for ev, err := range c.log.Events(ctx, id, 1) {
		if err != nil {
			return coder.Model{}, false, fmt.Errorf("execution %s: its model: %w", id, err)
		}
		if s, ok := ev.Data.(*eventlog.StepStarted); ok && s.StepKind == eventlog.StepLLM {
			first = s
			break
		}
	}
	m, scripted := chooseModel(first)
	if scripted {
		m.BaseURL = c.script
	}
	return m, scripted, nil
}

// runRoute is POST /api/e/{id}/run (serveapi.RunPath), by which forkline
// run of another process runs a coder execution in this one while it
// holds the log: one dispatch (sdk.Kernel.Run, so a dispatch that a
// worker of this process or another owner holds is ErrBusy), answered as
// a serveapi.RunResult. The answer's head is sent before the dispatch
// runs, so that a long run does not outlast the client's wait for it;
// what goes wrong before — a malformed or unknown ID, an execution of
// another agent — is a serveapi.Error with its status (400, 404). The
// request's context is the dispatch's: the client going away, or this
// process stopping, cuts the dispatch, which records no outcome then
// (DESIGN §15½.1).
func (c *servedCoder) runRoute(k *sdk.Kernel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id, err := eventlog.ParseID(r.PathValue("id"))
		if err != nil {
			answerRun(w, http.StatusBadRequest, fmt.Errorf("%w: execution ID %q: want 32 hex digits", eventlog.ErrInvalid, clip(r.PathValue("id"), 64)))
			return
		}
		info, err := k.Log().Info(ctx, id)
		if err != nil {
			answerRun(w, runStatus(err), err)
			return
		}
		if err := checkCoder(info); err != nil {
			answerRun(w, http.StatusBadRequest, fmt.Errorf("%w: %w", eventlog.ErrInvalid, err))
			return
		}
		m, scripted, err := c.model(ctx, id)
		if err != nil {
			answerRun(w, runStatus(err), err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		out := serveapi.RunResult{Model: m.Name, Scripted: scripted}
		if !scripted {
			out.BaseURL = m.BaseURL
		}
		res, runErr := k.Run(ctx, id)
		if res != nil {
			out.Output = res.Output
		}
		if runErr != nil {
			out.Error, out.Code = runErr.Error(), serveapi.Code(runErr)
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

// runStatus is the status of an error of the log: 404 for an unknown
// execution, 400 for bad input, 500 otherwise.
func runStatus(err error) int {
	switch {
	case errors.Is(err, eventlog.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, eventlog.ErrInvalid):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// answerRun answers err as a serveapi.Error with status.
func answerRun(w http.ResponseWriter, status int, err error) {
	b, _ := json.Marshal(serveapi.Error{Error: err.Error(), Code: serveapi.Code(err)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
