package webui

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// published is one key an execution published values under (SetEvent,
// DESIGN §18) and its newest value, for the execution's page.
type published struct {
	Key   string
	Value string // JSON, as recorded
	Seq   uint64
}

// talkOf returns the newest value of each key execution id published, in
// key order (Info.EventKeys), and its messages waiting in the inbox.
func (s *server) talkOf(r *http.Request, id eventlog.ID) ([]published, []eventlog.Message, error) {
	info, err := s.k.Info(r.Context(), id)
	if err != nil {
		return nil, nil, err
	}
	newest := map[string]published{}
	for _, e := range info.Events {
		newest[e.Key] = published{Key: e.Key, Value: string(e.Value), Seq: e.Seq}
	}
	out := make([]published, 0, len(newest))
	for _, k := range info.EventKeys {
		out = append(out, newest[k])
	}
	return out, info.Pending, nil
}

// send sends the form's JSON value to execution {id} under its topic
// (Kernel.Send; the form's id, if any, is the MessageID), then sends the
// browser to the execution's page. A value that is not JSON or an empty
// topic is 400; an ended execution, or a MessageID used with another
// value, 409; nothing is written then. Cross-site posts are refused by the
// handler's cross-origin protection, as every form's.
func (s *server) send(w http.ResponseWriter, r *http.Request) {
	info, ok := s.info(w, r)
	if !ok {
		return
	}
	topic, value := strings.TrimSpace(r.FormValue("topic")), strings.TrimSpace(r.FormValue("value"))
	if !json.Valid([]byte(value)) {
		badRequest(w, "value: want JSON (a string is written \"in quotes\"), got %q", value)
		return
	}
	var opts []sdk.SendOption
	if mid := strings.TrimSpace(r.FormValue("id")); mid != "" {
		opts = append(opts, sdk.MessageID(mid))
	}
	err := s.k.Send(r.Context(), info.ID, topic, json.RawMessage(value), opts...)
	switch {
	case errors.Is(err, sdk.ErrEnded), errors.Is(err, eventlog.ErrConflict):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		fail(w, err)
		return
	}
	// Relative to /e/{id}/send, so that the page works mounted under any
	// prefix.
	w.Header().Set("Location", "../"+info.ID.String())
	w.WriteHeader(http.StatusSeeOther)
}
