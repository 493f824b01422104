package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/forkline/forkline/eventlog"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/webui"
)

// diffJSON is diff's --json output: the comparison, with each resource's
// difference.
type diffJSON struct {
	*fork.Comparison
	Resources []webui.ResourceDiff `json:"resources"`
	HTML      string               `json:"html,omitempty"`
}

// cmdDiff compares executions aArg and bArg (fork.Diff) and their
// resources' newest checkpoints (driver.Differ; the data folder's dirfs
// store for the coder agent's workspace), as a table, JSON, or an HTML page
// written to htmlFile.
func cmdDiff(e *env, aArg, bArg, htmlFile string) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		ia, err := resolve(e, s, aArg)
		if err != nil {
			return err
		}
		ib, err := resolve(e, s, bArg)
		if err != nil {
			return err
		}
		if htmlFile != "" {
			if err := checkTarget("diff", htmlFile); err != nil {
				return err
			}
			if fi, err := os.Stat(filepath.Dir(htmlFile)); err != nil || !fi.IsDir() {
				return inputErrorf("diff: folder %s does not exist", filepath.Dir(htmlFile))
			}
		}
		c, res, err := compareExecutions(e.ctx, s, ia.ID, ib.ID, differs(e))
		if err != nil {
			return err
		}
		if htmlFile != "" {
			var buf bytes.Buffer
			if err := webui.WriteDiff(&buf, c, res); err != nil {
				return err
			}
			if err := writePage("diff", htmlFile, buf.Bytes()); err != nil {
				return err
			}
		}
		switch {
		case e.opts.json:
			return writeJSON(e.stdout, diffJSON{Comparison: c, Resources: res, HTML: htmlFile})
		case htmlFile != "":
			fmt.Fprintf(e.stdout, "wrote %s: %s compared with %s; open it in a browser\n", htmlFile, ia.ID, ib.ID)
			return nil
		}
		return writeDiffTable(e.stdout, c, res)
	})
}

// compareExecutions is what diff shows of executions a and b: their
// comparison (fork.Diff) and each resource's difference through the
// drivers in ds.
func compareExecutions(ctx context.Context, s eventlog.IndexedLog, a, b eventlog.ID, ds map[string]driver.Differ) (*fork.Comparison, []webui.ResourceDiff, error) {
	c, err := fork.Diff(ctx, s, a, b)
	if err != nil {
		return nil, nil, err
	}
	res, err := webui.DiffResources(ctx, c, ds)
	if err != nil {
		return nil, nil, err
	}
	return c, res, nil
}

// differs are the drivers whose checkpoints the command can compare: the
// data folder's dirfs store (the coder agent's workspace), if it exists.
// The command does not create it.
func differs(e *env) map[string]driver.Differ {
	out := map[string]driver.Differ{}
	if isDir(storeDir(e.opts.dir)) {
		out[dirfs.ID] = dirfs.New(dirfs.Config{Store: storeDir(e.opts.dir)})
	}
	return out
}

// stepText is a step outcome of a step of kind in a table cell: an LLM
// reply as the tool calls or text it holds (eventlog.LLMReplyText).
func stepText(kind eventlog.StepKind, o *fork.StepOutcome) string {
	if o == nil {
		return "-"
	}
	s := fmt.Sprintf("@%d %s", o.Seq, o.Status)
	switch {
	case len(o.Result) > 0 && kind == eventlog.StepLLM:
		s += " " + eventlog.LLMReplyText(o.Result)
	case len(o.Result) > 0:
		s += " " + clip(string(o.Result), 40)
	case o.Error != "":
		s += " " + clip(oneLine(o.Error), 40)
	case o.Reason != "":
		s += " " + clip(oneLine(o.Reason), 40)
	}
	if o.Overridden {
		s += " (override)"
	}
	return s
}

// outcomeCell is an execution's outcome in a table cell.
func outcomeCell(o fork.Outcome) string {
	s := o.Status.String()
	if o.Seq > 0 {
		s = fmt.Sprintf("@%d %s", o.Seq, s)
	}
	switch {
	case len(o.Output) > 0:
		s += " " + clip(string(o.Output), 40)
	case o.Error != "":
		s += " " + clip(oneLine(o.Error), 40)
	case o.Reason != "":
		s += " " + clip(oneLine(o.Reason), 40)
	}
	return s
}

// headText describes a side's resource at its head.
func headText(h *fork.ResourceHead) string {
	switch {
	case h == nil:
		return "not bound"
	case h.Ref == "":
		return "no checkpoint"
	case h.Covered:
		return fmt.Sprintf("checkpoint %s (seq %d), covers the head", shortRef(h.Ref), h.CapturedAt)
	}
	return fmt.Sprintf("checkpoint %s (seq %d), head not covered", shortRef(h.Ref), h.CapturedAt)
}

// writeDiffTable writes the comparison as tables: the prefix, the aligned
// steps past it, the outcomes, then each resource's difference.
func writeDiffTable(w io.Writer, c *fork.Comparison, res []webui.ResourceDiff) error {
	fmt.Fprintf(w, "A %s (%d events)\nB %s (%d events)\n", c.A, c.AHead, c.B, c.BHead)
	if c.Ancestor.IsZero() {
		fmt.Fprintln(w, "no shared prefix: no common ancestor (steps aligned by StepID)")
	} else {
		fmt.Fprintf(w, "shared prefix: events 1-%d of %s, %d step%s\n", c.Shared, c.Ancestor, len(c.Prefix), plural(len(c.Prefix)))
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "STEP\tA\tB\tCHANGE")
	for _, s := range c.Steps {
		step := string(s.Kind) + " " + s.Target
		if args := string(s.Args); args != "null" && s.Kind != eventlog.StepLLM {
			step += " " + clip(args, 30)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", step, stepText(s.Kind, s.A), stepText(s.Kind, s.B), s.Change)
		for _, f := range s.Fields {
			fmt.Fprintf(tw, "  field %s\t%s\t%s\t\n", fieldPath(f.Path), fieldText(f.A), fieldText(f.B))
		}
	}
	if len(c.Steps) == 0 {
		fmt.Fprintln(tw, "(no steps past the shared prefix)\t\t\t")
	}
	fmt.Fprintf(tw, "outcome\t%s\t%s\t%s\n", outcomeCell(c.OutputA), outcomeCell(c.OutputB), outcomeChange(c))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range res {
		fmt.Fprintf(w, "\nresource %s\n  A: %s\n  B: %s\n", r.Key, headText(r.A), headText(r.B))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		switch {
		case !r.Compared:
		case r.Difference.Empty():
			fmt.Fprintln(w, "  the same state")
		default:
			for line := range strings.Lines(r.Difference.String()) {
				fmt.Fprintf(w, "  %s", line)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// fieldPath is a changed field's JSON Pointer in the table, "(whole)" for
// the whole value.
func fieldPath(p string) string {
	if p == "" {
		return "(whole)"
	}
	return p
}

// fieldText is one side's value of a changed field, "-" where the side
// does not hold it.
func fieldText(v []byte) string {
	if v == nil {
		return "-"
	}
	return clip(string(v), 40)
}

// outcomeChange says whether the two outcomes differ.
func outcomeChange(c *fork.Comparison) string {
	a, b := c.OutputA, c.OutputB
	if a.Status == b.Status && bytes.Equal(a.Output, b.Output) && a.Error == b.Error && a.Code == b.Code && a.Reason == b.Reason {
		return string(fork.Same)
	}
	return string(fork.Changed)
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
