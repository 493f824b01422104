package kernelapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/forkline/forkline/sdk"
)

// Remote resources (DESIGN §20, §21½.4): the state an agent keeps outside
// the kernel — a workspace, a scratch database — bound to the execution
// through the kernel so that a fork restores it. The agent takes and
// restores its checkpoints itself; the kernel records the bindings and
// refs, and tells the agent which ref to restore from.

// initialRef is the ref of a remote resource's baseline, taken when it is
// created from the initial environment: restoring it is creating from the
// initial environment again.
const initialRef = "kernelapi:initial"

// remoteDriver is the driver of a remote agent's resource: DriverID
// "remote:" + the agent's driver_id, its configuration as the agent gave
// it. Its bindings open from any kernel process (the state is the
// agent's).
type remoteDriver struct {
	id     string
	config json.RawMessage
}

// remoteResource is the handle of a remote resource in one dispatch: what
// the agent was told (action, from) and the ref its state is at.
type remoteResource struct {
	key    string
	action string // "create" or "open"
	from   string // the checkpoint created from; "" for the initial environment

	mu      sync.Mutex
	ref     string // the checkpoint of the current state; "" when unknown
	changed bool   // a live step ran since ref was reported
}

// remoteBinding is a remote resource's binding: empty, since the
// execution and the key name the resource for the agent.
type remoteBinding struct{}

func (d remoteDriver) DriverID() string   { return "remote:" + d.id }
func (d remoteDriver) Configuration() any { return d.config }
func (d remoteDriver) Portable() bool     { return true }

func (d remoteDriver) Create(_ context.Context, from string) (*remoteResource, remoteBinding, error) {
	r := &remoteResource{action: "create", from: from, ref: from}
	if from == initialRef {
		r.from = ""
	}
	if from == "" {
		r.ref = initialRef
	}
	return r, remoteBinding{}, nil
}

func (d remoteDriver) Open(_ context.Context, _ remoteBinding) (*remoteResource, error) {
	return &remoteResource{action: "open", changed: true}, nil
}

// Checkpoint returns the ref the agent reported with the step that just
// ended, or the one the resource was created at when no step changed it.
func (d remoteDriver) Checkpoint(_ context.Context, r *remoteResource) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed || r.ref == "" {
		return "", fmt.Errorf("kernelapi: the agent reported no checkpoint of resource %q with the step's outcome", r.key)
	}
	return r.ref, nil
}

type bindBody struct {
	Key           string          `json:"key"`
	DriverID      string          `json:"driver_id"`
	Configuration json.RawMessage `json:"configuration"`
}

// bindResource binds the agent's resource key in the current dispatch and
// answers what the agent must do: {key, action: "create", from: ref or ""
// for the initial environment} or {key, action: "open"} for the resource
// it bound earlier in this execution. Bound again under the same dispatch,
// the same answer.
func (s *Server) bindResource(w http.ResponseWriter, r *http.Request, req *request) error {
	var b bindBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if err := validName("key", b.Key); err != nil {
		return err
	}
	if err := validName("driver_id", b.DriverID); err != nil {
		return err
	}
	if len(b.Configuration) == 0 {
		b.Configuration = json.RawMessage("null")
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	if terminal(info.Status) {
		return errorf(http.StatusConflict, "conflict", "execution %s has ended", info.ID)
	}
	ss, err := s.sessionFor(r, info)
	if err != nil {
		return err
	}
	h, err := sdk.Resource(ss.ctx, b.Key, remoteDriver{id: b.DriverID, config: b.Configuration})
	switch {
	case errors.Is(err, sdk.ErrResourceMismatch):
		return errorf(http.StatusConflict, "conflict", "%v", err)
	case err != nil && ss.ctx.Err() != nil:
		return &apiError{status: http.StatusConflict, code: "lease_superseded", message: "the attempt was stopped: " + err.Error()}
	case err != nil:
		return err
	}
	h.mu.Lock()
	h.key = b.Key
	h.mu.Unlock()
	ss.mu.Lock()
	ss.res[b.Key] = h
	ss.mu.Unlock()
	out := map[string]any{"key": b.Key, "action": h.action}
	if h.action == "create" {
		out["from"] = h.from
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkBound refuses keys (of field what) naming a resource not bound in
// ss.
func (ss *session) checkBound(what string, keys []string) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, key := range keys {
		if ss.res[key] == nil {
			return errorf(http.StatusBadRequest, "invalid_request", "%s: resource %q is not bound under this attempt", what, key)
		}
	}
	return nil
}

// stepRan marks the resources keys changed: a live step that affects
// them runs, and a checkpoint after it needs the ref the agent reports
// with its outcome.
func (ss *session) stepRan(keys []string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, key := range keys {
		if h := ss.res[key]; h != nil {
			h.mu.Lock()
			h.changed = true
			h.mu.Unlock()
		}
	}
}

// checkCaptures refuses captures naming a resource not bound in ss or an
// invalid ref.
func (ss *session) checkCaptures(captures map[string]string) error {
	keys := make([]string, 0, len(captures))
	for key, ref := range captures {
		if err := validName("captures."+key, ref); err != nil {
			return err
		}
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return ss.checkBound("captures", keys)
}

// applyCaptures records the refs the agent reported with a step's outcome
// on their resources, for the checkpoint the kernel takes after it.
func (ss *session) applyCaptures(captures map[string]string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for key, ref := range captures {
		h := ss.res[key]
		h.mu.Lock()
		h.ref, h.changed = ref, false
		h.mu.Unlock()
	}
}
