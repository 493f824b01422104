package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/resource"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// snapshot is every execution's lineage, event by event.
func snapshot(t testing.TB, log eventlog.Log) map[eventlog.ID][]string {
	t.Helper()
	out := map[eventlog.ID][]string{}
	for info, err := range log.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Errorf("list: %v", err)
			return nil
		}
		var fps []string
		for ev, err := range log.Events(context.Background(), info.ID, 1) {
			if err != nil {
				t.Errorf("events of %s: %v", info.ID, err)
				return nil
			}
			fps = append(fps, fmt.Sprintf("%d %s %s", ev.Seq, ev.Kind(), mustFingerprint(t, ev)))
		}
		out[info.ID] = fps
	}
	return out
}

// badBinding is a binding that does not encode as JSON.
type badBinding struct{ C chan int }

// invalidJSONBinding claims to encode itself but writes something that is
// not JSON.
type invalidJSONBinding struct{}

func (invalidJSONBinding) MarshalJSON() ([]byte, error) { return []byte("{not json"), nil }

// oddDriver is the test driver with a binding of another type.
type oddDriver[B any] struct {
	*testdriver.Driver
	binding B
}

func (d oddDriver[B]) Create(ctx context.Context, from string) (*testdriver.Handle, B, error) {
	h, _, err := d.Driver.Create(ctx, from)
	return h, d.binding, err
}

func (d oddDriver[B]) Open(ctx context.Context, _ B) (*testdriver.Handle, error) {
	h, _, err := d.Driver.Create(ctx, "")
	return h, err
}

// faultyDriver is the test driver with faults: a panic in Create, Open or
// Checkpoint, or an empty checkpoint ref.
type faultyDriver struct {
	*testdriver.Driver
	panicIn  string       // "create", "open", "checkpoint"
	armed    *atomic.Bool // the fault happens only while armed (nil: always)
	emptyRef bool
}

func (d faultyDriver) fault(where string) bool {
	return d.panicIn == where && (d.armed == nil || d.armed.Load())
}

func (d faultyDriver) Create(ctx context.Context, from string) (*testdriver.Handle, testdriver.Binding, error) {
	if d.fault("create") {
		panic("driver exploded in Create")
	}
	return d.Driver.Create(ctx, from)
}

func (d faultyDriver) Open(ctx context.Context, b testdriver.Binding) (*testdriver.Handle, error) {
	if d.fault("open") {
		panic("driver exploded in Open")
	}
	return d.Driver.Open(ctx, b)
}

func (d faultyDriver) Checkpoint(ctx context.Context, h *testdriver.Handle) (string, error) {
	if d.fault("checkpoint") {
		panic("driver exploded in Checkpoint")
	}
	if d.emptyRef {
		return "", nil
	}
	return d.Driver.Checkpoint(ctx, h)
}

// badInHandler is a bad call made inside a running handler.
type badInHandler struct {
	name string
	call func(ctx context.Context) error
	is   []error // the error wraps each
	says string  // the message contains it
	skip string  // a known bug: the case is skipped with this reason
}

func noop[A any](context.Context, A) (int, error) { return 0, nil }

// memKernel returns a kernel on an in-memory log, closed at cleanup.
func memKernel(t testing.TB) (*pebblestore.Store, *sdk.Kernel) {
	t.Helper()
	store, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	k, err := sdk.New(store)
	if err != nil {
		t.Fatal(err)
	}
	return store, k
}

// DESIGN §7: every bad input gets a clear error and appends nothing —
// compared event by event, over every execution, before and after the bad
// call.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	store, k := memKernel(t)
	drv := testdriver.New()

	cases := []badInHandler{
		{name: "EverySteps(0)", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(0))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "EverySteps(0)"},
		{name: "EverySteps(-1)", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(-1))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "EverySteps(-1)"},
		{name: "empty resource key", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "", drv)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "empty key"},
		{name: "nil driver pointer", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", (*testdriver.Driver)(nil))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "nil driver"},
		{name: "nil driver interface", call: func(ctx context.Context) error {
			_, err := sdk.Resource[*testdriver.Handle, testdriver.Binding](ctx, "ws", nil)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "nil driver"},
		{name: "configuration with an api_key", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", drv.WithID("test.mem.v1", map[string]any{"region": "eu", "api_key": "sk-123"}))
			return err
		}, is: []error{driver.ErrCredentials}, says: "api_key"},
		{name: "configuration with a nested password", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", drv.WithID("test.mem.v1", map[string]any{"db": map[string]any{"user": "u", "password": "p"}}))
			return err
		}, is: []error{driver.ErrCredentials}, says: "password"},
		{name: "binding that does not encode", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", oddDriver[badBinding]{Driver: drv, binding: badBinding{C: make(chan int)}})
			return err
		}, is: []error{resource.ErrBadBinding}, says: "binding"},
		{name: "binding that is not JSON", call: func(ctx context.Context) error {
			_, err := sdk.Resource(ctx, "ws", oddDriver[invalidJSONBinding]{Driver: drv})
			return err
		}, is: []error{resource.ErrBadBinding}, says: "binding"},
		{name: "Affects a resource not obtained", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[int], sdk.Affects("ws")).Call(ctx, 1)
			return err
		}, is: []error{sdk.ErrInvalid}, says: `"ws"`},
		{name: "Affects an empty key", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[int], sdk.Affects("")).Call(ctx, 1)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "empty resource key"},
		{name: "tool with an empty name", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("", noop[int]).Call(ctx, 1)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "empty name"},
		{name: "tool with a nil function", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool[int, int]("t", nil).Call(ctx, 1)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "nil function"},
		{name: "step with an empty name", call: func(ctx context.Context) error {
			_, err := sdk.Step(ctx, "", func(context.Context) (int, error) { return 0, nil })
			return err
		}, is: []error{sdk.ErrInvalid}, says: "empty name"},
		{name: "step with a nil function", call: func(ctx context.Context) error {
			_, err := sdk.Step[int](ctx, "s", nil)
			return err
		}, is: []error{sdk.ErrInvalid}, says: "nil function"},
		{name: "args that do not encode (a channel)", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[chan int]).Call(ctx, make(chan int))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "args do not encode"},
		{name: "args that do not encode (NaN)", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[float64]).Call(ctx, math.NaN())
			return err
		}, is: []error{sdk.ErrInvalid}, says: "args do not encode"},
		{name: "args of 64 MiB", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[string]).Call(ctx, strings.Repeat("x", 64<<20))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "args are too large"},
		{name: "args whose canonical form is over MaxValueSize", call: func(ctx context.Context) error {
			// 15 MiB of U+2028 line separators: under the bound as written,
			// 30 MiB once canonical JSON writes each as the escape \u2028.
			raw := append(append([]byte(`"`), bytes.Repeat([]byte("\u2028"), 5<<20)...), '"')
			_, err := sdk.DefineTool("t", noop[json.RawMessage]).Call(ctx, json.RawMessage(raw))
			return err
		}, is: []error{sdk.ErrInvalid}, says: "args are too large"},
		{name: "args that are not valid UTF-8", call: func(ctx context.Context) error {
			_, err := sdk.DefineTool("t", noop[string]).Call(ctx, "caf\xe9")
			return err
		}, is: []error{sdk.ErrInvalid}, says: "not valid UTF-8"},
	}
	var mu sync.Mutex
	type outcome struct {
		err           error
		before, after map[eventlog.ID][]string
	}
	outcomes := map[string]outcome{}
	_, err := sdk.Register(k, "bad", func(ctx context.Context, name string) (string, error) {
		for _, c := range cases {
			if c.name != name {
				continue
			}
			before := snapshot(t, store)
			err := c.call(ctx)
			after := snapshot(t, store)
			mu.Lock()
			outcomes[name] = outcome{err, before, after}
			mu.Unlock()
			return "done", nil
		}
		return "", fmt.Errorf("no case %q", name)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			id, err := k.Start(ctx, "bad", c.name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := k.Run(ctx, id); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			o := outcomes[c.name]
			mu.Unlock()
			wantClearError(t, o.err, c.is, c.says)
			if diff := cmp.Diff(o.before, o.after); diff != "" {
				t.Errorf("the bad call appended (-before +after):\n%s", diff)
			}
		})
	}

	// Outside a handler: the kernel's own entry points.
	t.Run("kernel", func(t *testing.T) {
		id, err := k.Start(ctx, "bad", cases[0].name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		head, err := store.Head(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var unknown eventlog.ID
		unknown[0], unknown[15] = 0x01, 0x99
		other, err := sdk.New(store) // a kernel without the agent "bad"
		if err != nil {
			t.Fatal(err)
		}
		pending, err := k.Start(ctx, "bad", cases[0].name) // never run
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			call func() error
			is   []error
			says string
		}{
			{"Start of an unknown agent", func() error { _, err := k.Start(ctx, "nobody", 1); return err },
				[]error{sdk.ErrInvalid}, `"nobody"`},
			{"Start with input that does not encode", func() error { _, err := k.Start(ctx, "bad", make(chan int)); return err },
				[]error{sdk.ErrInvalid}, "does not encode"},
			{"Run of an execution whose agent is not registered", func() error { _, err := other.Run(ctx, pending); return err },
				[]error{sdk.ErrInvalid}, `"bad"`},
			{"Fork at seq 0", func() error { _, err := k.Fork(ctx, id, 0); return err },
				[]error{sdk.ErrInvalid}, "seq 0"},
			{"Fork past the head", func() error { _, err := k.Fork(ctx, id, head+1); return err },
				[]error{sdk.ErrInvalid}, fmt.Sprintf("seq %d", head+1)},
			{"Coverage at seq 0", func() error { _, err := k.Coverage(ctx, id, 0); return err },
				[]error{sdk.ErrInvalid}, "seq 0"},
			{"Coverage past the head", func() error { _, err := k.Coverage(ctx, id, head+1); return err },
				[]error{sdk.ErrInvalid}, fmt.Sprintf("seq %d", head+1)},
			{"Run of an unknown execution", func() error { _, err := k.Run(ctx, unknown); return err },
				[]error{eventlog.ErrNotFound}, unknown.String()},
			{"Fork of an unknown execution", func() error { _, err := k.Fork(ctx, unknown, 1); return err },
				[]error{eventlog.ErrNotFound}, unknown.String()},
			{"Coverage of an unknown execution", func() error { _, err := k.Coverage(ctx, unknown, 1); return err },
				[]error{eventlog.ErrNotFound}, unknown.String()},
			{"Events of an unknown execution", func() error {
				for _, err := range k.Events(ctx, unknown) {
					return err
				}
				return nil
			}, []error{eventlog.ErrNotFound}, unknown.String()},
			{"Fork of the zero execution", func() error { _, err := k.Fork(ctx, eventlog.ID{}, 1); return err },
				nil, "zero"},
			{"Register with an empty name", func() error { _, err := sdk.Register(k, "", noop[int]); return err },
				[]error{sdk.ErrInvalid}, "empty agent name"},
			{"Register with a nil handler", func() error { _, err := sdk.Register[int, int](k, "x", nil); return err },
				[]error{sdk.ErrInvalid}, "nil handler"},
			{"Register twice", func() error { _, err := sdk.Register(k, "bad", noop[string]); return err },
				[]error{sdk.ErrInvalid}, "already registered"},
			{"WithGate(nil)", func() error { _, err := sdk.New(store, sdk.WithGate(nil)); return err },
				[]error{sdk.ErrInvalid}, "nil gate"},
			{"New(nil)", func() error { _, err := sdk.New(nil); return err },
				[]error{sdk.ErrInvalid}, "nil log"},
			{"Resource outside a handler", func() error { _, err := sdk.Resource(ctx, "ws", drv); return err },
				[]error{sdk.ErrNotInExecution}, "not called from a running handler"},
			{"Step outside a handler", func() error {
				_, err := sdk.Step(ctx, "s", func(context.Context) (int, error) { return 0, nil })
				return err
			}, []error{sdk.ErrNotInExecution}, "not called from a running handler"},
			{"Tool call outside a handler", func() error { _, err := sdk.DefineTool("t", noop[int]).Call(ctx, 1); return err },
				[]error{sdk.ErrNotInExecution}, "not called from a running handler"},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := snapshot(t, store)
				err := c.call()
				wantClearError(t, err, c.is, c.says)
				if diff := cmp.Diff(before, snapshot(t, store)); diff != "" {
					t.Errorf("the bad call appended (-before +after):\n%s", diff)
				}
			})
		}
		if key := sdk.IdempotencyKey(ctx); key != "" {
			t.Errorf("IdempotencyKey outside a body = %q", key)
		}
	})
}

// wantClearError: err is not nil, wraps each of is, and says says.
func wantClearError(t *testing.T, err error, is []error, says string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, target := range is {
		if !errors.Is(err, target) {
			t.Errorf("%v does not wrap %v", err, target)
		}
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("%q does not say %q", err, says)
	}
}

// TestNestedStep: a tool called inside a step's body is refused with
// ErrNestedStep and appends nothing; the outer step records its outcome.
func TestNestedStep(t *testing.T) {
	ctx := context.Background()
	store, k := memKernel(t)
	var inner error
	var before, after map[eventlog.ID][]string
	_, err := sdk.Register(k, "nest", func(ctx context.Context, _ int) (int, error) {
		return sdk.Step(ctx, "outer", func(ctx context.Context) (int, error) {
			before = snapshot(t, store)
			_, inner = sdk.DefineTool("t", noop[int]).Call(ctx, 1)
			after = snapshot(t, store)
			return 1, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := k.Start(ctx, "nest", 0)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantClearError(t, inner, []error{sdk.ErrNestedStep}, `"outer"`)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the nested call appended (-before +after):\n%s", diff)
	}
}

// TestPanickingDriver: a driver that panics never crashes the kernel.
// Checkpoint: the panic is a capture failure (resource.capture_failed),
// the call's outcome stands and the resource stays uncovered (DESIGN §5).
// Create and Open: the panic is recovered into an error wrapping
// resource.ErrDriverPanic that sdk.Resource returns to the handler; nothing
// of the resource is recorded.
func TestPanickingDriver(t *testing.T) {
	ctx := context.Background()

	for _, c := range []struct {
		name string
		drv  faultyDriver
		fail string // the capture_failed message contains it
	}{
		{"checkpoint panics", faultyDriver{Driver: testdriver.New(), panicIn: "checkpoint"}, "checkpoint panicked: driver exploded in Checkpoint"},
		{"empty ref", faultyDriver{Driver: testdriver.New(), emptyRef: true}, "empty checkpoint ref"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, k := memKernel(t)
			_, err := sdk.Register(k, "a", func(ctx context.Context, _ int) (string, error) {
				ws, err := sdk.Resource(ctx, "ws", c.drv)
				if err != nil {
					return "", err
				}
				return sdk.DefineTool("write", func(ctx context.Context, s string) (string, error) {
					return "wrote " + s, ws.WriteFile("f", []byte(s))
				}, sdk.Affects("ws")).Call(ctx, "x")
			})
			if err != nil {
				t.Fatal(err)
			}
			id, _ := k.Start(ctx, "a", 0)
			res, err := k.Run(ctx, id)
			if err != nil || string(res.Output) != `"wrote x"` {
				t.Fatalf("Run = %v, %v; want the tool's outcome", res, err)
			}
			var reasons []string
			for _, ev := range lineage(t, store, id) {
				switch p := ev.Data.(type) {
				case *eventlog.ResourceCaptured:
					t.Errorf("seq %d: captured %s", ev.Seq, p.Ref)
				case *eventlog.ResourceCaptureFailed:
					reasons = append(reasons, string(p.Reason))
					if !strings.Contains(p.Error, c.fail) {
						t.Errorf("seq %d: capture_failed %q does not say %q", ev.Seq, p.Error, c.fail)
					}
				}
			}
			if want := "[baseline steps completion]"; fmt.Sprint(reasons) != want {
				t.Errorf("capture failures %v, want %s", reasons, want)
			}
			head, _ := store.Head(ctx, id)
			p, err := k.Coverage(ctx, id, head)
			if err != nil || p.Covered {
				t.Errorf("coverage at the head = %+v, %v; want uncovered", p, err)
			}
		})
	}

	t.Run("create panics", func(t *testing.T) {
		store, k := memKernel(t)
		_, err := sdk.Register(k, "a", func(ctx context.Context, _ int) (int, error) {
			_, err := sdk.Resource(ctx, "ws", faultyDriver{Driver: testdriver.New(), panicIn: "create"})
			return 0, err
		})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := k.Start(ctx, "a", 0)
		for i := range 2 { // the second Run returns the recorded failure
			_, err := k.Run(ctx, id)
			var ee *sdk.ExecutionError
			if !errors.As(err, &ee) || ee.Code != eventlog.FailHandler || !strings.Contains(ee.Message, "driver exploded in Create") ||
				(i == 0 && !errors.Is(err, resource.ErrDriverPanic)) {
				t.Fatalf("Run = %v, want the recovered panic returned to the handler (ErrDriverPanic), failing the execution through it", err)
			}
		}
		if got, want := fmt.Sprint(kindsOf(lineage(t, store, id))), "[execution.created dispatch.started execution.failed]"; got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
	})

	t.Run("open panics", func(t *testing.T) {
		store, k := memKernel(t)
		var armed atomic.Bool
		bound := make(chan struct{}, 1)
		drv := faultyDriver{Driver: testdriver.New(), panicIn: "open", armed: &armed}
		_, err := sdk.Register(k, "a", func(ctx context.Context, _ int) (int, error) {
			if _, err := sdk.Resource(ctx, "ws", drv); err != nil {
				return 0, err
			}
			bound <- struct{}{}
			<-ctx.Done() // the first dispatch is cancelled here: no terminal event
			return 0, ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := k.Start(ctx, "a", 0)
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-bound; cancel() }()
		if _, err := k.Run(cctx, id); !errors.Is(err, context.Canceled) {
			t.Fatalf("first Run = %v, want cancelled", err)
		}
		armed.Store(true)
		_, err = k.Run(ctx, id) // opens the recorded binding: Open panics
		var ee *sdk.ExecutionError
		if !errors.As(err, &ee) || ee.Code != eventlog.FailHandler || !strings.Contains(ee.Message, "driver exploded in Open") || !errors.Is(err, resource.ErrDriverPanic) {
			t.Fatalf("second Run = %v, want the recovered panic returned to the handler (ErrDriverPanic)", err)
		}
		want := "[execution.created dispatch.started resource.bound resource.captured dispatch.started execution.failed]"
		if got := fmt.Sprint(kindsOf(lineage(t, store, id))); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
	})
}

// TestRefsWithDotDot: a checkpoint ref that is not a content address (with
// "..", absolute, empty-segmented) is refused by dirfs before it touches the
// file system, and a fork whose selection is such a ref fails with
// checkpoint_unavailable and writes nothing outside the store.
func TestRefsWithDotDot(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(root, "store")
	drv := dirfs.New(dirfs.Config{Store: store, NoSync: true})
	w, _, err := drv.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("a.txt", []byte("a")); err != nil {
		t.Fatal(err)
	}
	good, err := drv.Checkpoint(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	tree := func() []string {
		var out []string
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			out = append(out, p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := tree()
	for _, ref := range []string{
		"..", "../outside", "../../etc/passwd", "/etc/passwd", good + "/..", "../" + good,
		"a/../" + good[2:], strings.ToUpper(good), good[:63], "",
	} {
		if ref != "" { // Create("") is the initial environment
			if _, _, err := drv.Create(ctx, ref); !errors.Is(err, dirfs.ErrInvalidRef) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
				t.Errorf("Create(%q) = %v, want ErrInvalidRef and ErrCheckpointUnavailable", ref, err)
			}
		}
		if err := drv.Verify(ctx, ref); !errors.Is(err, dirfs.ErrInvalidRef) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidRef", ref, err)
		}
		if err := drv.Delete(ref); !errors.Is(err, dirfs.ErrInvalidRef) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidRef", ref, err)
		}
	}
	if diff := cmp.Diff(before, tree()); diff != "" {
		t.Errorf("refused refs changed the file system (-before +after):\n%s", diff)
	}
	for _, p := range []string{"../escape.txt", "/tmp/escape.txt", "a/../../escape.txt"} {
		if err := w.WriteFile(p, []byte("x")); !errors.Is(err, dirfs.ErrOutsideWorkspace) {
			t.Errorf("WriteFile(%q) = %v, want ErrOutsideWorkspace", p, err)
		}
		if _, err := w.ReadFile(p); !errors.Is(err, dirfs.ErrOutsideWorkspace) {
			t.Errorf("ReadFile(%q) = %v, want ErrOutsideWorkspace", p, err)
		}
	}

	// A driver that records a ".." ref: the fork that selects it fails with
	// checkpoint_unavailable, and nothing is written outside the store.
	log, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	k, err := sdk.New(log)
	if err != nil {
		t.Fatal(err)
	}
	var forked atomic.Bool
	_, err = sdk.Register(k, "a", func(ctx context.Context, _ int) (int, error) {
		var d driver.Driver[*dirfs.Workspace, dirfs.Binding] = drv
		if !forked.Load() {
			d = dotDotDriver{drv}
		}
		_, err := sdk.Resource(ctx, "ws", d)
		return 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := k.Start(ctx, "a", 0)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := lineage(t, log, id)
	fid, err := k.Fork(ctx, id, uint64(len(evs)))
	if err != nil {
		t.Fatal(err)
	}
	forked.Store(true)
	before = tree()
	_, err = k.Run(ctx, fid)
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != eventlog.FailCheckpointUnavailable || !errors.Is(err, driver.ErrCheckpointUnavailable) ||
		!strings.Contains(err.Error(), "../outside") {
		t.Fatalf("run of a fork selecting a \"..\" ref = %v, want checkpoint_unavailable naming it", err)
	}
	if diff := cmp.Diff(before, tree()); diff != "" {
		t.Errorf("the fork changed the file system (-before +after):\n%s", diff)
	}
}

// dotDotDriver is dirfs whose checkpoints are recorded as "../outside".
type dotDotDriver struct{ *dirfs.Driver }

func (dotDotDriver) Checkpoint(context.Context, *dirfs.Workspace) (string, error) {
	return "../outside", nil
}
