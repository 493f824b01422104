package fork_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/replay"
	"github.com/google/go-cmp/cmp"
)

// lineage builds the own events of one execution by hand, keeping a
// coverage fold of the whole lineage for the generations of its captures.
type lineage struct {
	t      *testing.T
	prefix uint64           // events the execution inherits
	events []eventlog.Event // its own events
	fold   *coverage.Fold
}

func newLineage(t *testing.T, prefix []eventlog.Event) *lineage {
	l := &lineage{t: t, prefix: uint64(len(prefix)), fold: coverage.New()}
	for _, ev := range prefix {
		if err := l.fold.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *lineage) head() uint64 { return l.prefix + uint64(len(l.events)) }

func (l *lineage) add(p eventlog.Payload) {
	ev := eventlog.Event{Seq: l.head() + 1, Time: epoch, Data: p}
	if err := l.fold.Apply(ev); err != nil {
		l.t.Fatal(err)
	}
	l.events = append(l.events, ev)
}

func (l *lineage) bind(key, from string) {
	l.add(&eventlog.ResourceBound{Key: key, DriverID: "test." + key, Binding: json.RawMessage(`{}`),
		From: from, EverySteps: 1, OnCompletion: true})
	if from == "" {
		l.capture(key, eventlog.CaptureBaseline)
	}
}

func (l *lineage) capture(key string, reason eventlog.CaptureReason) {
	st, _ := l.fold.State(key)
	l.add(&eventlog.ResourceCaptured{Key: key, Ref: fmt.Sprintf("%s-%d", key, l.head()+1),
		Generation: st.Generation, Reason: reason})
}

// call appends a write_file call id that affects ws and returns result,
// with its capture.
func (l *lineage) call(id, result string) {
	l.add(&eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "write_file",
		Args: []byte(`{"path":"` + id + `"}`), Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1})
	l.add(&eventlog.StepSucceeded{StepID: id, Result: []byte(`"` + result + `"`)})
	l.capture("ws", eventlog.CaptureSteps)
}

// start writes the lineage as a new root execution.
func (l *lineage) start(s eventlog.Log) eventlog.ID {
	l.t.Helper()
	return writeRoot(l.t, s, l.events)
}

// forkOf forks parent at at with fc (nil: the plan's) and returns the
// fork's lineage builder, its fork.created already in the log.
func forkOf(t *testing.T, s eventlog.IndexedLog, parent eventlog.ID, at uint64, overrides ...eventlog.StepOverride) (eventlog.ID, *lineage) {
	t.Helper()
	ctx := context.Background()
	plan, err := fork.PlanFromIndex(ctx, s, parent, at)
	if err != nil {
		t.Fatal(err)
	}
	fc := plan.Event()
	fc.Overrides = overrides
	id, err := s.Fork(ctx, parent, at, fc, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return id, newLineage(t, readAll(t, s, id))
}

// appendOwn appends l's own events to id.
func (l *lineage) appendOwn(s eventlog.Log, id eventlog.ID) {
	l.t.Helper()
	if _, err := s.Append(context.Background(), id, l.prefix, l.events...); err != nil {
		l.t.Fatal(err)
	}
}

// describe writes c in a compact text form, execution IDs by name.
func describe(c *fork.Comparison, names map[eventlog.ID]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%d vs %s@%d: shared %d from %s\n", names[c.A], c.AHead, names[c.B], c.BHead, c.Shared, names[c.Ancestor])
	var prefix []string
	for _, p := range c.Prefix {
		prefix = append(prefix, p.StepID)
	}
	fmt.Fprintf(&b, "prefix [%s]\n", strings.Join(prefix, " "))
	side := func(o *fork.StepOutcome) string {
		if o == nil {
			return "-"
		}
		s := fmt.Sprintf("@%d %s %s%s", o.Seq, o.Status, o.Result, o.Error)
		if o.Overridden {
			s += " (override)"
		}
		return s
	}
	for _, d := range c.Steps {
		fmt.Fprintf(&b, "%s %s %s: %s | %s\n", d.StepID, d.Target, d.Change, side(d.A), side(d.B))
	}
	out := func(o fork.Outcome) string { return fmt.Sprintf("%s@%d %s%s", o.Status, o.Seq, o.Output, o.Error) }
	fmt.Fprintf(&b, "output: %s | %s\n", out(c.OutputA), out(c.OutputB))
	head := func(h *fork.ResourceHead) string {
		if h == nil {
			return "-"
		}
		return fmt.Sprintf("%s@%d covered=%t", h.Ref, h.CapturedAt, h.Covered)
	}
	for _, r := range c.Resources {
		fmt.Fprintf(&b, "%s: %s | %s\n", r.Key, head(r.A), head(r.B))
	}
	return b.String()
}

// family writes a root R and forks of it:
//
//	R  1 created, 2 dispatch, 3-4 bind ws, s1 5-7 "a", s2 8-10 "b", s3 11-13 "c", 14 completed
//	F  fork of R at 7: s2 "B!", s4 "d", s3 "c", completed
//	G  fork of R at 10: s5 started, in flight
//	H  fork of F at 3 (inside R's part of F's lineage), not run
//	O  fork of R at 6 overriding s1's result, not run
func family(t *testing.T) (eventlog.IndexedLog, map[string]eventlog.ID) {
	s := openStore(t)
	r := newLineage(t, nil)
	r.add(&eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`"task"`)})
	r.add(&eventlog.DispatchStarted{Dispatch: 1})
	r.bind("ws", "")
	r.call("s1", "a")
	r.call("s2", "b")
	r.call("s3", "c")
	r.add(&eventlog.ExecutionCompleted{Output: []byte(`"R"`)})
	ids := map[string]eventlog.ID{"R": r.start(s)}

	fid, f := forkOf(t, s, ids["R"], 7)
	f.add(&eventlog.DispatchStarted{Dispatch: 2})
	f.bind("ws", "ws-7")
	f.call("s2", "B!")
	f.call("s4", "d")
	f.call("s3", "c")
	f.add(&eventlog.ExecutionCompleted{Output: []byte(`"F"`)})
	f.appendOwn(s, fid)
	ids["F"] = fid

	gid, g := forkOf(t, s, ids["R"], 10)
	g.add(&eventlog.DispatchStarted{Dispatch: 2})
	g.bind("ws", "ws-10")
	g.add(&eventlog.StepStarted{StepID: "s5", StepKind: eventlog.StepTool, Target: "write_file",
		Resources: []string{"ws"}, Idempotency: eventlog.AtMostOnce, Attempt: 1})
	g.appendOwn(s, gid)
	ids["G"] = gid

	ids["H"], _ = forkOf(t, s, fid, 3)
	ids["O"], _ = forkOf(t, s, ids["R"], 6, eventlog.StepOverride{StepID: "s1", Result: []byte(`"edited"`)})
	return s, ids
}

// TestDiffAlignment checks the exact shared prefix, alignment, outcomes and
// resource heads of parent/fork, sibling, fork-of-fork, override, same and
// unrelated pairs. DESIGN §12 "Diff".
func TestDiffAlignment(t *testing.T) {
	s, ids := family(t)
	names := map[eventlog.ID]string{{}: "none"}
	for n, id := range ids {
		names[id] = n
	}
	u := newLineage(t, nil) // unrelated: another run of the same agent
	u.add(&eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`"task"`)})
	u.add(&eventlog.DispatchStarted{Dispatch: 1})
	u.bind("ws", "")
	u.call("s1", "a")
	u.call("s3", "x")
	ids["U"] = u.start(s)
	names[ids["U"]] = "U"

	cases := []struct{ a, b, want string }{
		{"R", "F", `R@14 vs F@20: shared 7 from R
prefix [s1]
s2 write_file changed: @9 succeeded "b" | @12 succeeded "B!"
s4 write_file only_b: - | @15 succeeded "d"
s3 write_file same: @12 succeeded "c" | @18 succeeded "c"
output: completed@14 "R" | completed@20 "F"
ws: ws-13@13 covered=true | ws-19@19 covered=true
`},
		// Siblings: the prefix ends at the earlier fork point; G's
		// s2 lies past it in G but is R's event.
		{"F", "G", `F@20 vs G@14: shared 7 from R
prefix [s1]
s2 write_file changed: @12 succeeded "B!" | @9 succeeded "b"
s4 write_file only_a: @15 succeeded "d" | -
s3 write_file only_a: @18 succeeded "c" | -
s5 write_file only_b: - | @14 started 
output: completed@20 "F" | running@0 
ws: ws-19@19 covered=true | ws-10@13 covered=false
`},
		// H forks F at 3, inside the part of F's lineage that is R's.
		{"R", "H", `R@14 vs H@4: shared 3 from R
prefix []
s1 write_file only_a: @6 succeeded "a" | -
s2 write_file only_a: @9 succeeded "b" | -
s3 write_file only_a: @12 succeeded "c" | -
output: completed@14 "R" | pending@0 
ws: ws-13@13 covered=true | ws-4@4 covered=true
`},
		{"F", "H", `F@20 vs H@4: shared 3 from R
prefix []
s1 write_file only_a: @6 succeeded "a" | -
s2 write_file only_a: @12 succeeded "B!" | -
s4 write_file only_a: @15 succeeded "d" | -
s3 write_file only_a: @18 succeeded "c" | -
output: completed@20 "F" | pending@0 
ws: ws-19@19 covered=true | ws-4@4 covered=true
`},
		// An override changes a prefix step's result.
		{"R", "O", `R@14 vs O@7: shared 6 from R
prefix []
s1 write_file changed: @6 succeeded "a" | @6 succeeded "edited" (override)
s2 write_file only_a: @9 succeeded "b" | -
s3 write_file only_a: @12 succeeded "c" | -
output: completed@14 "R" | pending@0 
ws: ws-13@13 covered=true | ws-7@7 covered=true
`},
		{"F", "F", `F@20 vs F@20: shared 20 from F
prefix [s1 s2 s4 s3]
output: completed@20 "F" | completed@20 "F"
ws: ws-19@19 covered=true | ws-19@19 covered=true
`},
		// Unrelated executions: empty prefix, still aligned by StepID.
		{"R", "U", `R@14 vs U@10: shared 0 from none
prefix []
s1 write_file same: @6 succeeded "a" | @6 succeeded "a"
s2 write_file only_a: @9 succeeded "b" | -
s3 write_file changed: @12 succeeded "c" | @9 succeeded "x"
output: completed@14 "R" | running@0 
ws: ws-13@13 covered=true | ws-10@10 covered=true
`},
	}
	for _, tc := range cases {
		t.Run(tc.a+"-"+tc.b, func(t *testing.T) {
			c, err := fork.Diff(context.Background(), s, ids[tc.a], ids[tc.b])
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, describe(c, names)); d != "" {
				t.Errorf("Diff(%s, %s) (-want +got):\n%s", tc.a, tc.b, d)
			}
		})
	}
}

// TestDiffBadInput: an unknown or zero ID and a nil log are errors, and
// Diff appends nothing to either lineage.
func TestDiffBadInput(t *testing.T) {
	s, ids := family(t)
	ctx := context.Background()
	heads := func() map[string]uint64 {
		out := map[string]uint64{}
		for n, id := range ids {
			h, err := s.Head(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out[n] = h
		}
		return out
	}
	before := heads()
	if _, err := fork.Diff(ctx, s, ids["R"], eventlog.NewID()); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("unknown b: got %v, want ErrNotFound", err)
	}
	if _, err := fork.Diff(ctx, s, eventlog.ID{}, ids["R"]); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("zero a: got %v, want ErrInvalid", err)
	}
	if _, err := fork.Diff(ctx, nil, ids["R"], ids["F"]); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("nil log: got %v, want ErrInvalid", err)
	}
	if _, err := fork.Diff(ctx, s, ids["R"], ids["F"]); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, heads()); d != "" {
		t.Errorf("Diff changed heads (-before +after):\n%s", d)
	}
}

// TestDiffJSON pins the JSON names --json prints.
func TestDiffJSON(t *testing.T) {
	s, ids := family(t)
	c, err := fork.Diff(context.Background(), s, ids["R"], ids["O"])
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.Steps[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"step_id":"s1","kind":"tool","target":"write_file","args":{"path":"s1"},"change":"changed",` +
		`"a":{"seq":6,"status":"succeeded","result":"a"},"b":{"seq":6,"status":"succeeded","result":"edited","overridden":true},` +
		`"fields":[{"path":"","a":"a","b":"edited"}]}`
	if string(b) != want {
		t.Errorf("JSON of a changed step:\n got %s\nwant %s", b, want)
	}
}

// TestDiffEdgesOfAlignment checks the exact Diff of a parent P and two
// forks at the terminal event of P's first step: Y, not edited, and X,
// which overrides that step and a later one it does not hold yet and runs
// a step of its own. A step whose last event is the fork point is in the
// prefix; an override X does not hold is aligned with P's step, taking its
// kind, target and args; X's own step is placed before it on either side;
// an LLM call shows its response body. DESIGN §12 "Diff".
func TestDiffEdgesOfAlignment(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	started := func(id string, k eventlog.StepKind, target, args string) *eventlog.StepStarted {
		return &eventlog.StepStarted{StepID: id, StepKind: k, Target: target, Args: []byte(args),
			Idempotency: eventlog.SafeToRetry, Attempt: 1}
	}
	body := `{"choices":[]}`
	llmResult, err := json.Marshal(struct {
		Status int    `json:"status"`
		Body   []byte `json:"body"`
	}{200, []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	var evs []eventlog.Event
	for i, p := range []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"in"`)},
		&eventlog.DispatchStarted{Dispatch: 1},
		started("s1", eventlog.StepTool, "write_file", `{"path":"s1"}`),
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte(`"a"`)},
		started("s2", eventlog.StepTool, "write_file", `{"path":"s2"}`),
		&eventlog.StepSucceeded{StepID: "s2", Result: []byte(`"b"`)},
		started("s3", eventlog.StepLLM, "chat", `{"model":"m"}`),
		&eventlog.StepSucceeded{StepID: "s3", Result: llmResult},
		&eventlog.ExecutionCompleted{Output: []byte(`"P"`)},
	} {
		evs = append(evs, eventlog.Event{Seq: uint64(i + 1), Time: epoch, Data: p})
	}
	p := writeRoot(t, s, evs)
	x, _, err := fork.Create(ctx, s, p, 4, epoch, fork.WithOverride("s2", []byte(`"B"`)), fork.WithOverride("s1", []byte(`"A"`)))
	if err != nil {
		t.Fatal(err)
	}
	own := []eventlog.Event{
		{Seq: 6, Time: epoch, Data: &eventlog.DispatchStarted{Dispatch: 2}},
		{Seq: 7, Time: epoch, Data: started("s9", eventlog.StepTool, "write_file", `{"path":"s9"}`)},
		{Seq: 8, Time: epoch, Data: &eventlog.StepSucceeded{StepID: "s9", Result: []byte(`"n"`)}},
	}
	if _, err := s.Append(ctx, x, 5, own...); err != nil {
		t.Fatal(err)
	}
	y, _, err := fork.Create(ctx, s, p, 4, epoch)
	if err != nil {
		t.Fatal(err)
	}

	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	ok := func(seq uint64, result string) *fork.StepOutcome {
		return &fork.StepOutcome{Seq: seq, Status: replay.StepSucceeded, Result: raw(result)}
	}
	over := func(seq uint64, result string) *fork.StepOutcome {
		o := ok(seq, result)
		o.Overridden = true
		return o
	}
	s1 := fork.StepDiff{StepID: "s1", Kind: eventlog.StepTool, Target: "write_file", Args: raw(`{"path":"s1"}`), Change: fork.Changed}
	s2 := fork.StepDiff{StepID: "s2", Kind: eventlog.StepTool, Target: "write_file", Args: raw(`{"path":"s2"}`), Change: fork.Changed}
	s3 := fork.StepDiff{StepID: "s3", Kind: eventlog.StepLLM, Target: "chat", Args: raw(`{"model":"m"}`)}
	s9 := fork.StepDiff{StepID: "s9", Kind: eventlog.StepTool, Target: "write_file", Args: raw(`{"path":"s9"}`)}
	with := func(d fork.StepDiff, c fork.Change, a, b *fork.StepOutcome) fork.StepDiff {
		d.A, d.B = a, b
		if c != "" {
			d.Change = c
		}
		if d.Change == fork.Changed {
			d.Fields = []fork.FieldChange{{A: a.Result, B: b.Result}} // a whole string changed
		}
		return d
	}
	completed := fork.Outcome{Seq: 9, Status: eventlog.StatusCompleted, Output: raw(`"P"`)}
	cases := []struct {
		name string
		a, b eventlog.ID
		want *fork.Comparison
	}{
		{"P-Y", p, y, &fork.Comparison{A: p, B: y, AHead: 9, BHead: 5, Shared: 4, Ancestor: p,
			// s1 ends at the fork point: it is in the prefix.
			Prefix: []fork.PrefixStep{{StepID: "s1", Kind: eventlog.StepTool, Target: "write_file", StepOutcome: *ok(4, `"a"`)}},
			Steps: []fork.StepDiff{
				with(s2, fork.OnlyA, ok(6, `"b"`), nil),
				with(s3, fork.OnlyA, ok(8, body), nil),
			},
			OutputA: completed, OutputB: fork.Outcome{Status: eventlog.StatusPending}, Resources: []fork.ResourceDiff{}}},
		{"X-P", x, p, &fork.Comparison{A: x, B: p, AHead: 8, BHead: 9, Shared: 4, Ancestor: p,
			Prefix: []fork.PrefixStep{},
			Steps: []fork.StepDiff{
				with(s1, "", over(4, `"A"`), ok(4, `"a"`)),
				with(s9, fork.OnlyA, ok(8, `"n"`), nil),
				// X does not hold s2: kind, target and args are P's.
				with(s2, "", over(0, `"B"`), ok(6, `"b"`)),
				with(s3, fork.OnlyB, nil, ok(8, body)),
			},
			OutputA: fork.Outcome{Status: eventlog.StatusRunning}, OutputB: completed, Resources: []fork.ResourceDiff{}}},
		{"P-X", p, x, &fork.Comparison{A: p, B: x, AHead: 9, BHead: 8, Shared: 4, Ancestor: p,
			Prefix: []fork.PrefixStep{},
			Steps: []fork.StepDiff{
				with(s1, "", ok(4, `"a"`), over(4, `"A"`)),
				// X's own step comes before the next step both hold.
				with(s9, fork.OnlyB, nil, ok(8, `"n"`)),
				with(s2, "", ok(6, `"b"`), over(0, `"B"`)),
				with(s3, fork.OnlyA, ok(8, body), nil),
			},
			OutputA: completed, OutputB: fork.Outcome{Status: eventlog.StatusRunning}, Resources: []fork.ResourceDiff{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fork.Diff(ctx, s, tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, c); d != "" {
				t.Errorf("Diff (-want +got):\n%s", d)
			}
		})
	}
}
