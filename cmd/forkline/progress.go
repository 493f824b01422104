package main

import (
	"golang.org/x/term"

	"fmt"
	"io"
	"os"
)

// progressEvery is how many events (or executions) a scan reads between
// two updates of its progress line.
var progressEvery uint64 = 10000

// progress is the line a long scan keeps updated on stderr. It is shown
// when stderr is a terminal, or always with --progress; the zero value
// shows nothing.
type progress struct {
	w     io.Writer
	label string
	unit  string // what is counted, e.g. "events"
	n     uint64
	shown bool
}

func newProgress(e *env, label, unit string) *progress {
	if !e.opts.progress && !isTerminal(e.stderr) {
		return &progress{}
	}
	return &progress{w: e.stderr, label: label, unit: unit}
}

// tick counts one more thing read.
func (p *progress) tick() {
	p.n++
	if p.w == nil || p.n%progressEvery != 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s: %d %s", p.label, p.n, p.unit)
	p.shown = true
}

// done ends the progress line with the final count, if one was shown.
func (p *progress) done() {
	if p.shown {
		fmt.Fprintf(p.w, "\r%s: %d %s, done\n", p.label, p.n, p.unit)
		p.shown = false
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
