package webui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/webui"
	"github.com/google/go-cmp/cmp"
)

// collect reads every event of id from seq from.
func collect(t *testing.T, log eventlog.Log, id eventlog.ID, from uint64) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range log.Events(context.Background(), id, from) {
		if err != nil {
			t.Fatalf("events of %s from %d: %v", id, from, err)
		}
		out = append(out, ev)
	}
	return out
}

func infos(t *testing.T, log eventlog.Log, f eventlog.Filter) []eventlog.Info {
	t.Helper()
	var out []eventlog.Info
	for info, err := range log.List(context.Background(), f) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info)
	}
	return out
}

// sameInstant compares times by instant, as the wire keeps them.
var sameInstant = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// TestAPIReadsWhatTheStoreHolds: through the JSON API (serveapi.Log)
// every read answers what the store answers directly: executions under
// each filter, infos, whole lineages decoded from their records (in pages,
// cut at the head of the first page even while events are appended),
// index states and histories; errors keep their class; writes are refused
// and append nothing.
func TestAPIReadsWhatTheStoreHolds(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, b := r.run(t, 1), r.run(t, 2)
	fk, err := r.k.Fork(ctx, a, 3)
	if err != nil {
		t.Fatal(err)
	}
	log := r.k.Log()
	// A long lineage with a resource, appended directly: more events than
	// one page, and index states that change.
	long, err := log.Create(ctx, &eventlog.ExecutionCreated{Agent: "long", Input: []byte(`{}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	evs := []eventlog.Event{
		{Time: time.Now(), Data: &eventlog.DispatchStarted{Dispatch: 1}},
		{Time: time.Now(), Data: &eventlog.ResourceBound{Key: "ws", DriverID: "test.v1", Binding: []byte(`{"w":1}`), EverySteps: 1}},
		{Time: time.Now(), Data: &eventlog.ResourceCaptured{Key: "ws", Ref: "r1", Generation: 1, Reason: eventlog.CaptureBaseline}},
	}
	for i := range serveapi.PageSize + 200 {
		id := fmt.Sprint("s", i)
		evs = append(evs,
			eventlog.Event{Time: time.Now(), Data: &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "t",
				Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			eventlog.Event{Time: time.Now(), Data: &eventlog.StepSucceeded{StepID: id, Result: []byte(`1`)}})
		if i%300 == 0 {
			evs = append(evs, eventlog.Event{Time: time.Now(), Data: &eventlog.ResourceCaptured{Key: "ws", Ref: fmt.Sprint("r", i+2),
				Generation: uint64(i + 2), Reason: eventlog.CaptureSteps}})
		}
	}
	head, err := log.Append(ctx, long, 1, evs...)
	if err != nil {
		t.Fatal(err)
	}

	remote, err := serveapi.Dial(ctx, r.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	for _, f := range []eventlog.Filter{{}, {Agent: "two"}, {Parent: a}, {Status: []eventlog.Status{eventlog.StatusPending, eventlog.StatusCompleted}},
		{After: a, Limit: 2}} {
		if d := cmp.Diff(infos(t, log, f), infos(t, remote, f), sameInstant); d != "" {
			t.Errorf("List(%+v) through the API differs:\n%s", f, d)
		}
	}
	for _, id := range []eventlog.ID{a, b, fk, long} {
		want, err := log.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Info(ctx, id)
		if err != nil || !cmp.Equal(got, want, sameInstant) {
			t.Errorf("Info(%s) = %+v, %v; want %+v", id, got, err, want)
		}
		for _, from := range []uint64{1, 2, 700} {
			if d := cmp.Diff(collect(t, log, id, from), collect(t, remote, id, from), sameInstant); d != "" {
				t.Errorf("Events(%s, %d) through the API differs:\n%s", id, from, d)
			}
		}
	}
	for _, at := range []uint64{1, 3, 4, 5, 6, 700, head} {
		want, err1 := log.ResourceStates(ctx, long, at)
		got, err2 := remote.ResourceStates(ctx, long, at)
		if err1 != nil || err2 != nil || !cmp.Equal(got, want) {
			t.Errorf("ResourceStates(%d) = %v, %v; want %v, %v", at, got, err2, want, err1)
		}
	}
	history := func(l eventlog.Index) []eventlog.ResourceState {
		var out []eventlog.ResourceState
		for st, err := range l.ResourceHistory(ctx, long, "ws", 2) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
		return out
	}
	if want, got := history(log), history(remote); len(want) <= serveapi.PageSize || !cmp.Equal(got, want) {
		t.Errorf("ResourceHistory through the API: %d states, want %d (more than a page), equal %v", len(got), len(want), cmp.Equal(got, want))
	}

	// Events appended while a read is under way are not part of it.
	n := uint64(0)
	for ev, err := range remote.Events(ctx, long, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 1 {
			more := eventlog.Event{Time: time.Now(), Data: &eventlog.MarkerRecorded{Name: "later"}}
			if _, err := log.Append(ctx, long, head, more); err != nil {
				t.Fatal(err)
			}
		}
		_ = ev
	}
	if n != head {
		t.Errorf("a read through the API yielded %d events, want the %d up to the head when it began", n, head)
	}

	if _, err := remote.Info(ctx, eventlog.ID{1}); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Info of an unknown id through the API: %v, want ErrNotFound", err)
	}
	for _, err := range remote.ResourceHistory(ctx, long, "", 0) {
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ResourceHistory without a key: %v, want ErrInvalid", err)
		}
	}
	before := collect(t, log, a, 1)
	if _, err := remote.Append(ctx, a, uint64(len(before)), eventlog.Event{Data: &eventlog.MarkerRecorded{Name: "x"}}); !errors.Is(err, serveapi.ErrReadOnly) {
		t.Errorf("Append through the API: %v, want ErrReadOnly", err)
	}
	if _, err := remote.Fork(ctx, a, 2, &eventlog.ForkCreated{}, time.Now()); !errors.Is(err, serveapi.ErrReadOnly) {
		t.Errorf("Fork through the API: %v, want ErrReadOnly", err)
	}
	if after := collect(t, log, a, 1); len(after) != len(before) || len(infos(t, log, eventlog.Filter{})) != 4 {
		t.Errorf("a refused write appended something")
	}
}

// TestAPIErrors: bad requests are answered 400 or 404 with a JSON error
// whose code classifies them; a server that does not answer with the
// advertised token is refused at Dial.
func TestAPIErrors(t *testing.T) {
	r := newRig(t)
	id := r.run(t, 1)
	for path, want := range map[string]struct {
		status int
		code   string
	}{
		"/api/e/nonsense":                               {400, "invalid"},
		"/api/e/nonsense/deltas":                        {400, "invalid"},
		"/api/e/" + eventlog.ID{1}.String() + "/deltas": {404, "not_found"},
		"/api/e/" + eventlog.ID{1}.String():             {404, "not_found"},
		"/api/e/" + id.String() + "/events?limit=0":     {400, "invalid"},
		"/api/e/" + id.String() + "/events?to=99":       {400, "invalid"},
		"/api/e/" + id.String() + "/events?to=x":        {400, "invalid"},
		"/api/e/" + id.String() + "/resources?at=0":     {400, "invalid"},
		"/api/executions?status=sleeping":               {400, "invalid"},
		"/api/nothing":                                  {404, "not_found"},
	} {
		resp, err := http.Get(r.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var e serveapi.Error
		derr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != want.status || derr != nil || e.Code != want.code || e.Error == "" {
			t.Errorf("GET %s: %s, %+v (%v); want %d with code %q", path, resp.Status, e, derr, want.status, want.code)
		}
	}
	// Dial presents its token and wants the proof of it back.
	tokened := httptest.NewServer(webui.Handler(r.k, webui.WithToken("other")))
	defer tokened.Close()
	if _, err := serveapi.Dial(context.Background(), tokened.URL, "mine"); !errors.Is(err, serveapi.ErrUnreachable) {
		t.Errorf("Dial of a server with another token: %v, want ErrUnreachable", err)
	}
	if _, err := serveapi.Dial(context.Background(), r.srv.URL, "mine"); !errors.Is(err, serveapi.ErrUnreachable) {
		t.Errorf("Dial of a server that demands no token (so proves none): %v, want ErrUnreachable", err)
	}
	if l, err := serveapi.Dial(context.Background(), tokened.URL, "other"); err != nil {
		t.Errorf("Dial with the server's token: %v", err)
	} else {
		l.Close()
	}
}

// TestAPIListPages: a listing longer than a page comes whole through the
// client, in order, with limits and after= honoured.
func TestAPIListPages(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	log := r.k.Log()
	for range serveapi.PageSize + 5 {
		if _, err := log.Create(ctx, &eventlog.ExecutionCreated{Agent: "many", Input: []byte(`{}`)}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	remote, err := serveapi.Dial(ctx, r.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	all := infos(t, log, eventlog.Filter{})
	for _, f := range []eventlog.Filter{{}, {Agent: "many"}, {Limit: serveapi.PageSize + 2}, {After: all[3].ID, Limit: serveapi.PageSize}, {Limit: 3}} {
		if d := cmp.Diff(infos(t, log, f), infos(t, remote, f), sameInstant); d != "" {
			t.Errorf("List(%+v) through the API differs:\n%s", f, d)
		}
	}
}
