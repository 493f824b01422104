package kernelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/forkline/forkline/sdk"
)

// streamFrame is one server-sent event of GET /v0/executions/{id}/stream:
// a delta an agent posted to a step's stream route, or a streaming model
// call's piece of a Go handler.
type streamFrame struct {
	StepID string `json:"step_id"`
	Seq    int    `json:"seq"`
	Data   string `json:"data"`
}

// stream is the client's live tail of an execution's deltas
// (sdk.Kernel.WatchDeltas), as server-sent events: one "data:" frame per
// delta, a ": keep-alive" comment every Options.KeepAlive while none
// comes, and the end of the response when the execution ends. Nothing is
// replayed: a client sees the deltas from when it connects.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	ctx := r.Context()
	type item struct {
		dl  sdk.Delta
		err error
	}
	items := make(chan item)
	go func() {
		defer close(items)
		for dl, err := range s.k.WatchDeltas(ctx, info.ID) {
			select {
			case items <- item{dl, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush()
	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok {
				return nil
			}
			if it.err != nil {
				if ctx.Err() == nil {
					s.opts.Logger.Warn("kernelapi: delta stream ended", "execution", info.ID.String(), "error", it.err.Error())
				}
				return nil
			}
			b, err := json.Marshal(streamFrame{StepID: it.dl.StepID, Seq: it.dl.Index, Data: string(it.dl.Data)})
			if err != nil {
				return nil
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return nil
			}
			flush()
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			flush()
		case <-ctx.Done():
			return nil
		}
	}
}
