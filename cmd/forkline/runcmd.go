package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/serveapi"
)

// cmdRun runs one dispatch of an execution of the coder agent, such as a
// fork made with forkline fork. While forkline serve holds the data
// folder's log (Pebble locks it), the serving process runs it (runServed).
func cmdRun(e *env, idArg string) error {
	s, err := openExisting(e, false)
	if err != nil {
		if r := servingLog(e, err); r != nil {
			return runAndClose(r, func() error { return runServed(e, r, idArg) })
		}
		return servedWrite(e, err)
	}
	return runAndClose(s, func() error { return runLocal(e, s, idArg) })
}

// runLocal runs the dispatch in this process, on log s.
func runLocal(e *env, s logStore, idArg string) error {
	info, err := resolve(e, s, idArg)
	if err != nil {
		return err
	}
	if err := checkCoder(info); err != nil {
		return err
	}
	l, err := readLineage(e, s, info, 0)
	if err != nil {
		return err
	}
	m, err := modelFor(l)
	if err != nil {
		return err
	}
	defer m.close()
	// The data folder's own store, wherever the lineage was recorded.
	dirfsStore, blobs, closeBlobs, err := coderStores(e)
	if err != nil {
		return err
	}
	defer closeBlobs()
	ck, err := openCoderKernel(s, dirfsStore, blobs, m, ownerOptions(e)...)
	if err != nil {
		return err
	}
	defer ck.k.Close()
	res, runErr := ck.k.Run(e.ctx, info.ID)
	after, err := readCoderLineage(e, ck, info.ID)
	if err != nil {
		return err
	}
	var output []byte
	if res != nil {
		output = res.Output
	}
	return reportRun(e, l, after, m, output, runErr)
}

// servingLog is the log of the data folder read through the forkline
// serve that holds it, when err, the failure to open it, says another
// process holds it and that process advertises itself and answers; nil
// otherwise.
func servingLog(e *env, err error) *serveapi.Log {
	if e.opts.db != "" || !errors.Is(err, pebblestore.ErrLocked) {
		return nil
	}
	a, ok, aerr := serveapi.ReadAdvert(e.opts.dir)
	if aerr != nil || !ok {
		return nil
	}
	r, derr := serveapi.Dial(e.ctx, a.URL, a.Token)
	if derr != nil {
		return nil
	}
	return r
}

// runServed asks the forkline serve that holds the log (r) to run the
// dispatch (serveapi.Log.Run: POST /api/e/{id}/run) and prints what
// runLocal prints, reading the lineage before and after through r.
func runServed(e *env, r *serveapi.Log, idArg string) error {
	info, err := resolve(e, r, idArg)
	if err != nil {
		return err
	}
	if err := checkCoder(info); err != nil {
		return err
	}
	l, err := readLineage(e, r, info, 0)
	if err != nil {
		return err
	}
	res, err := r.Run(e.ctx, info.ID)
	if err != nil {
		return fmt.Errorf("run %s through forkline serve at %s: %w", info.ID, r.URL(), err)
	}
	afterInfo, err := r.Info(e.ctx, info.ID)
	if err != nil {
		return err
	}
	after, err := readLineage(e, r, afterInfo, 0)
	if err != nil {
		return err
	}
	m := &model{Model: coder.Model{Name: res.Model, BaseURL: res.BaseURL}, scripted: res.Scripted}
	return reportRun(e, l, after, m, res.Output, res.Err())
}

// checkCoder refuses an execution of another agent than the coder.
func checkCoder(info eventlog.Info) error {
	if info.Agent != coderAgent {
		return &inputError{fmt.Errorf("execution %s is of agent %q: %w; run it with the program that registers that agent (sdk.Kernel.Run)",
			info.ID, info.Agent, errNotCoder)}
	}
	return nil
}

// reportRun prints what a run did: l is the lineage before it, after the
// lineage after it, m the model, output the execution's output when the
// dispatch returned one and runErr the dispatch's error.
func reportRun(e *env, l, after *lineage, m *model, output []byte, runErr error) error {
	info := l.info
	if e.opts.json {
		out := map[string]any{"id": info.ID.String(), "model": m.Name, "scripted": m.scripted,
			"status": after.status(), "head": after.info.Head, "appended": after.info.Head - info.Head}
		if output != nil {
			out["output"] = json.RawMessage(eventlog.JSONValue(output))
		}
		if runErr != nil {
			out["error"] = runErr.Error()
		}
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "model: %s\n", m.describe())
		switch {
		case info.Status.Terminal():
			fmt.Fprintf(e.stdout, "execution %s had already %s; nothing ran\n", info.ID, l.status())
		default:
			fmt.Fprintf(e.stdout, "execution %s: %s, %d events (%d appended; live calls: %s)\n",
				info.ID, after.status(), after.info.Head, after.info.Head-info.Head, liveCalls(after, info.Head))
		}
		if output != nil {
			fmt.Fprintf(e.stdout, "output: %s\n", eventlog.ValueText(output, 100))
		}
	}
	if runErr != nil {
		return fmt.Errorf("run %s: %w", info.ID, runErr)
	}
	return nil
}
