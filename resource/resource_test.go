package resource_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/driver/sqlitedb"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/resource"
)

// odd is a driver whose behaviour each test sets.
type odd struct {
	id       string
	config   any
	binding  any
	ref      string
	err      error
	panicMsg string
}

func (o *odd) DriverID() string   { return o.id }
func (o *odd) Configuration() any { return o.config }
func (o *odd) Create(ctx context.Context, from string) (string, any, error) {
	return "handle", o.binding, o.err
}
func (o *odd) Open(ctx context.Context, b any) (string, error) { return "handle", o.err }
func (o *odd) Checkpoint(ctx context.Context, h string) (string, error) {
	if o.panicMsg != "" {
		panic(o.panicMsg)
	}
	return o.ref, o.err
}

var _ driver.Driver[string, any] = (*odd)(nil)

func erase(t *testing.T, d driver.Driver[string, any]) resource.Driver {
	t.Helper()
	e, err := resource.Erase(d)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEraseNil(t *testing.T) {
	var d *testdriver.Driver
	if _, err := resource.Erase[*testdriver.Handle, testdriver.Binding](d); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Erase(nil) = %v, want ErrInvalid", err)
	}
}

func TestBind(t *testing.T) {
	ctx := context.Background()
	pol := policy.DefaultCheckpoints()
	for _, tc := range []struct {
		name string
		d    *odd
		key  string
		pol  policy.Checkpoints
		want error
	}{
		{"ok", &odd{id: "x", binding: map[string]int{"n": 1}}, "k", pol, nil},
		{"empty key", &odd{id: "x"}, "", pol, eventlog.ErrInvalid},
		{"every 0", &odd{id: "x"}, "k", policy.Checkpoints{EverySteps: 0, OnCompletion: true}, eventlog.ErrInvalid},
		{"credentials", &odd{id: "x", config: map[string]string{"password": "hunter2"}}, "k", pol, driver.ErrCredentials},
		{"binding not JSON", &odd{id: "x", binding: make(chan int)}, "k", pol, resource.ErrBadBinding},
		{"create fails", &odd{id: "x", err: driver.ErrCheckpointUnavailable}, "k", pol, driver.ErrCheckpointUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ev, err := resource.Bind(ctx, erase(t, tc.d), tc.key, "ref1", tc.pol, false)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if ev.Key != "k" || ev.DriverID != "x" || ev.From != "ref1" || string(ev.Binding) != `{"n":1}` || ev.EverySteps != 1 || !ev.OnCompletion {
					t.Fatalf("event %+v", ev)
				}
				if err := (eventlog.Event{Seq: 3, Data: ev}).Validate(); err != nil {
					t.Fatalf("Bind made an invalid event: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	rec := &eventlog.ResourceBound{Key: "k", DriverID: "x", Configuration: json.RawMessage(`{"a":1,"b":[1,2]}`)}
	for _, tc := range []struct {
		name string
		d    *odd
		ok   bool
	}{
		{"same", &odd{id: "x", config: map[string]any{"b": []int{1, 2}, "a": 1}}, true},
		{"other id", &odd{id: "y", config: map[string]any{"a": 1, "b": []int{1, 2}}}, false},
		{"other config", &odd{id: "x", config: map[string]any{"a": 2, "b": []int{1, 2}}}, false},
		{"no config", &odd{id: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := resource.Match(erase(t, tc.d), rec)
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, resource.ErrMismatch)) {
				t.Fatalf("Match = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if err := resource.Match(erase(t, &odd{id: "x"}), &eventlog.ResourceBound{Key: "k", DriverID: "x", Configuration: json.RawMessage("null")}); err != nil {
		t.Fatalf("nil configuration vs recorded null: %v", err)
	}
}

func TestCapture(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		d    *odd
		want string
	}{
		{"ok", &odd{id: "x", ref: "r1"}, "captured r1"},
		{"error", &odd{id: "x", err: errors.New("disk full")}, "failed disk full"},
		{"empty ref", &odd{id: "x"}, "failed driver x returned an empty checkpoint ref"},
		{"panic", &odd{id: "x", panicMsg: "boom"}, "failed checkpoint panicked: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			switch p := resource.Capture(ctx, erase(t, tc.d), "handle", "k", 4, eventlog.CaptureSteps).(type) {
			case *eventlog.ResourceCaptured:
				if p.Generation != 4 || p.Key != "k" || p.Reason != eventlog.CaptureSteps {
					t.Fatalf("captured %+v", p)
				}
				got = "captured " + p.Ref
			case *eventlog.ResourceCaptureFailed:
				got = "failed " + p.Error
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Capture = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOpenBadBinding(t *testing.T) {
	d, err := resource.Erase[*testdriver.Handle, testdriver.Binding](testdriver.New())
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventlog.ResourceBound{Key: "k", DriverID: "test.mem.v1", Binding: json.RawMessage(`["not", "a", "binding"]`)}
	if _, err := resource.Open(context.Background(), d, rec); !errors.Is(err, resource.ErrBadBinding) {
		t.Fatalf("Open = %v, want ErrBadBinding", err)
	}
}

// TestMatchReadsOldConfiguration: DESIGN §11 (relocatable configuration).
// A binding recorded by an older dirfs or sqlitedb, whose Configuration
// named the store's absolute path, matches today's driver with its store
// anywhere; a recorded key the driver does not know still mismatches, and
// so does another driver's ID.
func TestMatchReadsOldConfiguration(t *testing.T) {
	dirs := []struct {
		name string
		d    resource.Driver
		id   string
		cfg  string // today's recorded form
	}{
		{"dirfs", must(resource.Erase(dirfs.New(dirfs.Config{Store: t.TempDir()}))), dirfs.ID, ""},
		{"sqlitedb", must(resource.Erase(sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: "CREATE TABLE t(x)"}))), sqlitedb.ID, `,"schema":"CREATE TABLE t(x)"`},
	}
	for _, c := range dirs {
		cfg, err := c.d.Configuration()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cfg), "/") {
			t.Errorf("%s: Configuration %s holds a path", c.name, cfg)
		}
		for rec, ok := range map[string]bool{
			`{"store":"/old/path/ws"` + c.cfg + `}`:                        true,
			`{"store":"/old/path/ws","template":"/old/tmpl"` + c.cfg + `}`: true,
			`{"store":"/old/path/ws","compression":"zstd"` + c.cfg + `}`:   false,
			`{"store":"/old/path/ws","schema":"CREATE TABLE u(y)"}`:        false,
		} {
			err := resource.Match(c.d, &eventlog.ResourceBound{Key: "k", DriverID: c.id, Configuration: json.RawMessage(rec)})
			if ok && err != nil {
				t.Errorf("%s: Match(%s) = %v, want a match", c.name, rec, err)
			}
			if !ok && !errors.Is(err, resource.ErrMismatch) {
				t.Errorf("%s: Match(%s) = %v, want ErrMismatch", c.name, rec, err)
			}
		}
		if err := resource.Match(c.d, &eventlog.ResourceBound{Key: "k", DriverID: "other.v1", Configuration: json.RawMessage(`{"store":"/x"}`)}); !errors.Is(err, resource.ErrMismatch) {
			t.Errorf("%s: another DriverID matched: %v", c.name, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
