package eventlog_test

import (
	"context"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// baseLog is a Log that is also a Deleter; only the methods As looks at
// matter, so the rest come from a nil embedded Log.
type baseLog struct {
	eventlog.Log
	name string
}

func (b *baseLog) Delete(context.Context, eventlog.ID) error { return nil }

// wrapLog wraps a Log with only the Log methods and Unwrap.
type wrapLog struct {
	eventlog.Log
}

func (w wrapLog) Unwrap() eventlog.Log { return w.Log }

// deletingWrap wraps a Log and implements Deleter itself.
type deletingWrap struct {
	wrapLog
}

func (deletingWrap) Delete(context.Context, eventlog.ID) error { return nil }

// loopLog unwraps to itself.
type loopLog struct {
	eventlog.Log
}

func (l *loopLog) Unwrap() eventlog.Log { return l }

// nilUnwrap ends its chain with a nil Log.
type nilUnwrap struct {
	eventlog.Log
}

func (nilUnwrap) Unwrap() eventlog.Log { return nil }

// DESIGN §15½.3: As walks Unwrap() Log as errors.As walks Unwrap() error.
func TestAs(t *testing.T) {
	base := &baseLog{name: "base"}
	outer := deletingWrap{wrapLog{wrapLog{base}}}
	cases := []struct {
		name string
		log  eventlog.Log
		want any // the log As must find; nil: none
	}{
		{"the log itself", base, base},
		{"through one wrapper", wrapLog{base}, base},
		{"through two wrappers", wrapLog{wrapLog{base}}, base},
		{"a wrapper that implements it itself is found first", outer, outer},
		{"a wrapper without Unwrap hides it", struct{ eventlog.Log }{base}, nil},
		{"a chain that ends in nil", nilUnwrap{}, nil},
		{"a chain that loops ends", &loopLog{}, nil},
		{"a nil log", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d eventlog.Deleter
			ok := eventlog.As(c.log, &d)
			if ok != (c.want != nil) {
				t.Fatalf("As = %v, want %v", ok, c.want != nil)
			}
			if ok && any(d) != c.want {
				t.Fatalf("As found %#v, want %#v", d, c.want)
			}
			if !ok && d != nil {
				t.Fatalf("As set the target to %#v though it found nothing", d)
			}
		})
	}

	// A concrete target type that implements Log.
	var b *baseLog
	if !eventlog.As(wrapLog{wrapLog{base}}, &b) || b != base {
		t.Fatalf("As(&*baseLog) = %v, want the base log", b)
	}
	// Targets As cannot fill: it reports false, it does not panic.
	var notLog *int
	var d eventlog.Deleter
	for name, target := range map[string]any{
		"nil": nil, "not a pointer": d, "nil pointer": (*eventlog.Deleter)(nil),
		"pointer to a type that is not a Log": &notLog,
	} {
		if eventlog.As(base, target) {
			t.Errorf("As with a target %s = true", name)
		}
	}
}
