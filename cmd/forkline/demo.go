package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

// demoReport is what the demo found, for --json.
type demoReport struct {
	Dir       string       `json:"dir"`
	Model     string       `json:"model"`
	Scripted  bool         `json:"scripted"`
	Execution string       `json:"execution"`
	Events    uint64       `json:"events"`
	Answer    string       `json:"answer"`
	Timeline  string       `json:"timeline_html"`
	Forks     []demoFork   `json:"forks"`
	Points    []pointJSON  `json:"points"`
	Windows   []windowJSON `json:"windows"`
}

// demoFork is one of the demo's forks and what it showed.
type demoFork struct {
	ID      string          `json:"id"`
	At      uint64          `json:"at"`
	Kind    string          `json:"kind"` // the kind of the event forked at
	Covered bool            `json:"covered"`
	Plan    []selectionJSON `json:"plan"`
	Events  uint64          `json:"events"`
	// RestoredDiff lists the paths where the fork's restored workspace
	// differs from the parent's workspace at the fork point (as its recorded
	// writes up to there produce it); empty for a covered fork.
	RestoredDiff []fileDiff `json:"restored_diff"`
	// FinalDiff lists the paths where the fork's final workspace differs
	// from the parent's final workspace.
	FinalDiff []fileDiff `json:"final_diff"`
	// Edit is the edited LLM reply of the third fork; nil for the others.
	Edit *demoEdit `json:"edit,omitempty"`
	// Diff is `forkline diff --json` of the parent and the third fork; nil
	// for the others.
	Diff *diffJSON `json:"diff,omitempty"`
}

func cmdDemo(e *env, task string) error {
	if fi, err := os.Stat(e.opts.dir); err == nil && !fi.IsDir() {
		return inputErrorf("%s is not a folder", e.opts.dir)
	}
	store, err := openLog(e)
	if err != nil {
		return err
	}
	defer store.Close()
	m, err := modelFromEnv()
	if err != nil {
		return err
	}
	defer m.close()
	dirfsStore, blobs, closeBlobs, err := coderStores(e)
	if err != nil {
		return err
	}
	defer closeBlobs()
	out := e.stdout
	if e.opts.json {
		out = io.Discard
	}
	replies := &replyPrinter{out: out}
	m.OnReply = replies.on
	ck, err := openCoderKernel(store, dirfsStore, blobs, m, ownerOptions(e)...)
	if err != nil {
		return err
	}
	defer ck.k.Close()

	rep := demoReport{Dir: e.opts.dir, Model: m.Name, Scripted: m.scripted}
	section := func(title string) { fmt.Fprintf(out, "\n== %s ==\n", title) }

	fmt.Fprintln(out, "forkline demo: the coder agent of the reference page, in Go")
	logAt := logDir(e.opts.dir)
	if e.opts.db != "" {
		logAt = e.opts.where()
	}
	fmt.Fprintf(out, "  data folder  %s (event log %s, workspace store %s)\n", e.opts.dir, logAt, storeDir(e.opts.dir))
	fmt.Fprintf(out, "  model        %s\n", m.describe())
	fmt.Fprintf(out, "  workspace    a dirfs Resource with EverySteps(5): write_file affects it, read_file does not\n")

	// 1. Run the agent.
	section("1. Run")
	id, err := ck.k.Start(e.ctx, coderAgent, coder.Input{Task: task})
	if err != nil {
		return err
	}
	if m.Stream {
		fmt.Fprintln(out, "the model's replies, as they stream in (each piece printed as it arrives):")
	}
	replies.live = true
	res, err := ck.k.Run(e.ctx, id)
	replies.live = false
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	var answer coder.Output
	if err := res.Decode(&answer); err != nil {
		return err
	}
	parent, err := readCoderLineage(e, ck, id)
	if err != nil {
		return err
	}
	rep.Execution, rep.Events, rep.Answer = id.String(), parent.info.Head, answer.Answer
	fmt.Fprintf(out, "execution %s: %s in %d events\n", id, parent.status(), parent.info.Head)
	fmt.Fprintf(out, "  live calls   %s\n", liveCalls(parent, 0))
	fmt.Fprintf(out, "  checkpoints  %s\n", checkpoints(parent))
	fmt.Fprintf(out, "  answer       %s\n", clip(oneLine(answer.Answer), 100))

	// 2. Its timeline.
	section("2. Timeline: every event, and what a fork at it restores")
	if err := writeTimeline(out, parent); err != nil {
		return err
	}
	for _, ev := range parent.events {
		p, err := parent.cov.Point(ev.Seq)
		if err != nil {
			return err
		}
		rep.Points = append(rep.Points, pointOut(p, ev.Kind().String()))
	}
	for _, w := range parent.cov.Windows() {
		rep.Windows = append(rep.Windows, windowJSON(w))
	}
	page := filepath.Join(e.opts.dir, "timeline.html")
	if err := writeTimelineFile(e, ck.store, page, parent); err != nil {
		return err
	}
	rep.Timeline = page
	fmt.Fprintf(out, "the same timeline as a picture: %s (updated with the forks below)\n", page)

	// 3 and 4. Fork at a covered and an uncovered event, run both, compare.
	covered, uncovered, err := pickForkPoints(parent)
	if err != nil {
		return err
	}
	parentFinal, err := ck.ownWorkspace(e.ctx, parent)
	if err != nil {
		return err
	}
	if d := diff(stateAt(parent, parent.info.Head), parentFinal, "the recorded writes", "the workspace"); len(d) > 0 {
		return fmt.Errorf("execution %s: its workspace does not hold what its recorded writes produce: %s %s", id, d[0].Path, d[0].What)
	}
	points := []struct {
		title string
		seq   uint64
	}{{"3. Fork at a covered event", covered}, {"4. Fork at an uncovered event", uncovered}}
	for _, pt := range points {
		if pt.seq == 0 {
			section(pt.title)
			fmt.Fprintln(out, "none: this run has no such event (a real model may write fewer files)")
			continue
		}
		section(fmt.Sprintf("%s: seq %d", pt.title, pt.seq))
		f, err := demoForkAt(e, out, ck, parent, parentFinal, pt.seq)
		if err != nil {
			return err
		}
		rep.Forks = append(rep.Forks, f)
	}
	section("5. Fork at an LLM reply, edited to write another file, then diff")
	f, err := demoEditedFork(e, out, ck, parent, parentFinal)
	switch {
	case errors.Is(err, errNoEditPoint):
		fmt.Fprintln(out, "none: no LLM reply of this run asks for write_file (a real model may answer without tools)")
	case err != nil:
		return err
	default:
		rep.Forks = append(rep.Forks, f)
	}
	if err := writeTimelineFile(e, ck.store, page, parent); err != nil {
		return err
	}

	section("Look around")
	df := dirFlag(e)
	fmt.Fprintf(out, "  forkline%s tree\n", df)
	fmt.Fprintf(out, "  forkline%s coverage %s\n", df, id)
	fmt.Fprintf(out, "  forkline%s timeline %s --html timeline.html\n", df, id)
	fmt.Fprintf(out, "  forkline%s fork %s <seq>   then   forkline%s run <fork id>\n", df, id, df)
	if e.opts.json {
		return writeJSON(e.stdout, rep)
	}
	return nil
}

// replyPrinter prints the model's replies of the demo's first run as they
// stream in: a line per reply, its pieces printed as they arrive, clipped
// at replyWidth characters. It prints only while live is set (the forks'
// live replies are not shown); the coder calls it only for live replies.
type replyPrinter struct {
	out   io.Writer
	live  bool // set while the first run runs; the handler runs on Run's goroutine
	turn  int  // the reply being printed, 0 for none
	width int  // characters of the reply printed so far
}

// replyWidth is how many characters of a reply the demo prints.
const replyWidth = 90

func (p *replyPrinter) on(turn int, piece string, done bool) {
	if !p.live {
		return
	}
	if done {
		if p.turn == turn {
			fmt.Fprintln(p.out)
			p.turn = 0
		}
		return
	}
	if p.turn != turn {
		fmt.Fprintf(p.out, "  reply %-3d ", turn)
		p.turn, p.width = turn, 0
	}
	if p.width >= replyWidth {
		return
	}
	r := []rune(piece)
	if p.width+len(r) > replyWidth {
		r = append(r[:replyWidth-p.width], '…')
	}
	p.width += len(r)
	fmt.Fprint(p.out, string(r))
}

// readCoderLineage reads an execution's lineage through the kernel's log.
func readCoderLineage(e *env, ck *coderKernel, id eventlog.ID) (*lineage, error) {
	info, err := ck.store.Info(e.ctx, id)
	if err != nil {
		return nil, err
	}
	return readLineage(e, ck.store, info, 0)
}

// pickForkPoints chooses the demo's two fork points: the checkpoint taken
// after the fifth write (covered: the capture is the state), and the
// outcome of the first write after it (uncovered: the write's change is in
// no checkpoint of the prefix).
func pickForkPoints(l *lineage) (covered, uncovered uint64, err error) {
	isCovered := func(seq uint64) (bool, error) {
		p, err := l.cov.Point(seq)
		return p.Covered, err
	}
	var fallback uint64
	for _, ev := range l.events {
		c, ok := ev.Data.(*eventlog.ResourceCaptured)
		if !ok || c.Reason == eventlog.CaptureBaseline {
			continue
		}
		if ok, err := isCovered(ev.Seq); err != nil {
			return 0, 0, err
		} else if !ok {
			continue
		}
		if c.Reason == eventlog.CaptureSteps {
			covered = ev.Seq
			break
		}
		if fallback == 0 {
			fallback = ev.Seq
		}
	}
	if covered == 0 {
		covered = fallback
	}
	// Prefer a write after the covered point, then any write, then any
	// event: a real model may write fewer than five files.
	ws := writes(l, l.info.Head)
	for _, after := range []uint64{covered, 0} {
		for _, w := range ws {
			if w.started > after {
				if ok, err := isCovered(w.done); err != nil {
					return 0, 0, err
				} else if !ok {
					return covered, w.done, nil
				}
			}
		}
	}
	for _, ev := range l.events {
		if ok, err := isCovered(ev.Seq); err != nil {
			return 0, 0, err
		} else if !ok {
			return covered, ev.Seq, nil
		}
	}
	return covered, 0, nil
}

// demoForkAt forks the parent at seq, runs the fork, and compares its
// workspaces with the parent's.
//
// With opts the fork is made by the kernel's Fork with them (an edited
// fork); its plan is the parent's coverage at seq, which the fork's own
// binding is checked against below.
func demoForkAt(e *env, out io.Writer, ck *coderKernel, parent *lineage, parentFinal files, seq uint64, opts ...sdk.ForkOption) (demoFork, error) {
	ev := parent.events[seq-1]
	fmt.Fprintf(out, "forking at seq %d: %s %s\n", seq, ev.Kind(), detail(ev, parent.steps))
	var fid eventlog.ID
	var p coverage.Point
	if len(opts) == 0 {
		id, plan, err := fork.Create(e.ctx, ck.store, parent.info.ID, seq, now())
		if err != nil {
			return demoFork{}, err
		}
		fid, p = id, coverage.Point{Seq: plan.At, Covered: plan.Covered, Resources: plan.Selections}
	} else {
		id, err := ck.k.Fork(e.ctx, parent.info.ID, seq, opts...)
		if err != nil {
			return demoFork{}, err
		}
		if p, err = parent.cov.Point(seq); err != nil {
			return demoFork{}, err
		}
		fid = id
	}
	fmt.Fprintf(out, "fork %s: the fork point is %s; it restores %s\n", fid, coveredText(p.Covered), restoresText(p))
	res := demoFork{ID: fid.String(), At: seq, Kind: ev.Kind().String(), Covered: p.Covered, Plan: pointOut(p, "").Resources}

	if _, err := ck.k.Run(e.ctx, fid); err != nil {
		return demoFork{}, fmt.Errorf("run fork %s: %w", fid, err)
	}
	fl, err := readCoderLineage(e, ck, fid)
	if err != nil {
		return demoFork{}, err
	}
	res.Events = fl.info.Head
	fmt.Fprintf(out, "ran the fork: %s; it replayed events 1-%d and appended %d of its own (live calls: %s)\n",
		fl.status(), seq, fl.info.Head-seq, liveCalls(fl, seq))

	var sel coverage.Selection
	for _, s := range p.Resources {
		if s.Key == workspaceKey {
			sel = s
		}
	}
	for _, ev := range fl.events[seq:] {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok && b.Key == workspaceKey && b.From != sel.Ref {
			return demoFork{}, fmt.Errorf("fork %s bound its workspace from %q, its plan selected %q", fid, b.From, sel.Ref)
		}
	}
	restored, err := ck.restored(e.ctx, sel.Ref)
	if err != nil {
		return demoFork{}, err
	}
	atFork := stateAt(parent, seq)
	res.RestoredDiff = diff(restored, atFork, "the restored workspace", "the parent's")
	what := "checkpoint " + shortRef(sel.Ref)
	if sel.Ref == "" {
		what = "initial environment"
	}
	fmt.Fprintf(out, "the fork's restored workspace (%s) vs the parent's workspace at seq %d (what its recorded writes up to there produce):\n", what, seq)
	writeDiff(out, res.RestoredDiff, len(atFork), func(d fileDiff) string {
		var at []string
		for _, w := range writes(parent, seq) {
			if w.path == d.Path && w.done > sel.CapturedAt {
				at = append(at, fmt.Sprintf("seq %d", w.started))
			}
		}
		if len(at) == 0 {
			return ""
		}
		return fmt.Sprintf(" — written by write_file at %s, after the checkpoint (seq %d)", strings.Join(at, ", "), sel.CapturedAt)
	})

	forkFinal, err := ck.ownWorkspace(e.ctx, fl)
	if err != nil {
		return demoFork{}, err
	}
	res.FinalDiff = diff(forkFinal, parentFinal, "the fork's", "the parent's")
	fmt.Fprintf(out, "the fork's final workspace vs the parent's final workspace:\n")
	writeDiff(out, res.FinalDiff, len(parentFinal), nil)
	if res.RestoredDiff == nil {
		res.RestoredDiff = []fileDiff{}
	}
	if res.FinalDiff == nil {
		res.FinalDiff = []fileDiff{}
	}
	switch {
	case p.Covered && len(res.RestoredDiff) == 0:
		fmt.Fprintln(out, "=> covered: the fork restored exactly the parent's state at the fork point.")
	case p.Covered:
		return demoFork{}, fmt.Errorf("fork %s at covered seq %d restored a workspace that differs from the parent's at that point", fid, seq)
	case len(res.RestoredDiff) == 0:
		fmt.Fprintf(out, "=> uncovered: steps ran after the checkpoint (seq %d), but none of them wrote a file, so the restored\n"+
			"   workspace is the parent's at the fork point.\n", sel.CapturedAt)
	default:
		fmt.Fprintf(out, "=> uncovered: the fork restored the newest earlier checkpoint; the recorded results of seqs %d-%d replayed,\n"+
			"   but their changes are not in the restored workspace. That is the documented trade-off of an\n"+
			"   uncovered fork, and forkline coverage says so before you fork.\n", sel.CapturedAt+1, seq)
	}
	return res, nil
}

// writeDiff prints a workspace comparison.
func writeDiff(w io.Writer, d []fileDiff, n int, why func(fileDiff) string) {
	if len(d) == 0 {
		fmt.Fprintf(w, "  identical (%d files)\n", n)
		return
	}
	for _, x := range d {
		extra := ""
		if why != nil {
			extra = why(x)
		}
		fmt.Fprintf(w, "  %-16s %s%s\n", x.Path, x.What, extra)
	}
}

// liveCalls counts the step.started events after seq after, by kind and
// tool.
func liveCalls(l *lineage, after uint64) string {
	var llm, tools int
	byTool := map[string]int{}
	var names []string
	for _, ev := range l.events[after:] {
		s, ok := ev.Data.(*eventlog.StepStarted)
		if !ok {
			continue
		}
		if s.StepKind == eventlog.StepLLM {
			llm++
			continue
		}
		tools++
		if byTool[s.Target] == 0 {
			names = append(names, s.Target)
		}
		byTool[s.Target]++
	}
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%d %s", byTool[n], n))
	}
	s := fmt.Sprintf("%d llm, %d tool", llm, tools)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// checkpoints lists the lineage's captures.
func checkpoints(l *lineage) string {
	var parts []string
	for _, ev := range l.events {
		if c, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
			parts = append(parts, fmt.Sprintf("%s at seq %d", c.Reason, ev.Seq))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%s)", len(parts), strings.Join(parts, ", "))
}
