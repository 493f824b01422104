package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// identityKernel is one in-memory kernel per fuzzing process with the agent
// "ident", which calls the tool "echo" once with the args registered under
// its input token.
var identityKernel struct {
	once sync.Once
	k    *sdk.Kernel
	err  error

	mu   sync.Mutex
	args map[string]any
	next int
}

func identityRig(t *testing.T) *sdk.Kernel {
	t.Helper()
	ik := &identityKernel
	ik.once.Do(func() {
		ik.args = map[string]any{}
		ik.k, ik.err = sdk.Open("")
		if ik.err != nil {
			return
		}
		echo := sdk.DefineTool("echo", func(ctx context.Context, a any) (string, error) { return "ok", nil })
		_, ik.err = sdk.Register(ik.k, "ident", func(ctx context.Context, token string) (string, error) {
			ik.mu.Lock()
			a, ok := ik.args[token]
			ik.mu.Unlock()
			if !ok {
				return "", fmt.Errorf("no args for %q", token)
			}
			return echo.Call(ctx, a)
		})
	})
	if ik.err != nil {
		t.Fatal(ik.err)
	}
	return ik.k
}

// callEcho runs one execution that calls echo with args and returns the
// StepID and args recorded in its step.started.
func callEcho(t *testing.T, args any) (string, []byte) {
	t.Helper()
	k, id := startEcho(t, args)
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatalf("run with args %#v: %v", args, err)
	}
	return recordedStart(t, k, id)
}

// startEcho starts an execution of "ident" that will call echo with args.
func startEcho(t *testing.T, args any) (*sdk.Kernel, eventlog.ID) {
	t.Helper()
	k := identityRig(t)
	ik := &identityKernel
	ik.mu.Lock()
	ik.next++
	token := fmt.Sprint(ik.next)
	ik.args[token] = args
	ik.mu.Unlock()
	t.Cleanup(func() {
		ik.mu.Lock()
		delete(ik.args, token)
		ik.mu.Unlock()
	})
	id, err := identityRig(t).Start(context.Background(), "ident", token)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// runEcho is callEcho for args that must be refused: it returns Run's
// error and fails if the refused call appended a step.started.
func runEcho(t *testing.T, args any) error {
	t.Helper()
	k, id := startEcho(t, args)
	ctx := context.Background()
	_, runErr := k.Run(ctx, id)
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind() == eventlog.KindStepStarted {
			t.Fatalf("args %#v: refused, yet a step.started was appended", args)
		}
	}
	return runErr
}

// recordedStart returns the StepID and args of id's first step.started.
func recordedStart(t *testing.T, k *sdk.Kernel, id eventlog.ID) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := ev.Data.(*eventlog.StepStarted); ok {
			return s.StepID, s.Args
		}
	}
	t.Fatal("no step.started")
	return "", nil
}

// FuzzStepIdentity: a tool call's identity does not depend on how its args
// were written (DESIGN §4: canonical args, sorted map keys). The same JSON
// value passed as written, with its object keys in another order and other
// white space, as a Go map, and after a JSON round trip is recorded with
// the same canonical args and the same StepID, and that StepID is
// sdk.StepID of the recorded args.
func FuzzStepIdentity(f *testing.F) {
	for _, seed := range []string{
		`{"b":1,"a":[1,2,{"d":"x","c":null}]}`,
		`{"path":"greet.go","content":"package greet\n"}`,
		`{"z":{"y":{"x":{"w":[true,false,null]}}},"a":""}`,
		`{"dup":1,"dup":2}`,
		`{"n":-0,"e":1E3,"f":1.50,"big":123456789012345678901234567890}`,
		`{"html":"<a href='x'>&amp;</a>","ls":"\u2028\u2029"}`,
		"{\"invalid utf-8\":\"\xff\xfe\"}",
		`{"é":"ü","😀":"\ud83d\ude00","":0}`,
		` [ {"b":2,"a":1} , {"a":1,"b":2} ] `,
		`"just a string"`,
		`12.0`,
		`null`,
		`{}`,
		`[]`,
		`{`,
	} {
		f.Add([]byte(seed), uint64(len(seed)))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			return
		}
		if _, err := dec.Token(); err != io.EOF {
			return // trailing data: not one JSON value
		}
		if !utf8.Valid(data) {
			// JSON text that is not UTF-8 cannot say its strings: as raw
			// args it is refused, appending nothing.
			if err := runEcho(t, json.RawMessage(data)); !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("args %q that are not UTF-8: Run = %v, want ErrInvalid", data, err)
			}
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var permuted bytes.Buffer
		writePermuted(&permuted, tree, rng)
		again, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		dec = json.NewDecoder(bytes.NewReader(again))
		dec.UseNumber()
		var roundTrip any
		if err := dec.Decode(&roundTrip); err != nil {
			t.Fatal(err)
		}
		forms := []struct {
			name string
			args any
		}{
			{"as written", json.RawMessage(data)},
			{"keys permuted", json.RawMessage(permuted.Bytes())},
			{"a Go value", tree},
			{"after a JSON round trip", roundTrip},
		}
		wantID, wantArgs := callEcho(t, forms[0].args)
		if id := sdk.StepID(eventlog.StepTool, "echo", wantArgs, 0); id != wantID {
			t.Fatalf("step.started has StepID %s, sdk.StepID of its args is %s", wantID, id)
		}
		for _, form := range forms[1:] {
			id, args := callEcho(t, form.args)
			if id != wantID || !bytes.Equal(args, wantArgs) {
				t.Fatalf("%s: StepID %s args %s; as written: StepID %s args %s\n(input %q, permuted %q)",
					form.name, id, args, wantID, wantArgs, data, permuted.Bytes())
			}
		}
	})
}

// writePermuted writes v as JSON with each object's keys in a random order
// and random white space between tokens.
func writePermuted(b *bytes.Buffer, v any, rng *rand.Rand) {
	space := func() { b.WriteString([]string{"", " ", "\n", "\t ", "  \r\n"}[rng.IntN(5)]) }
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			kb, _ := json.Marshal(k)
			b.Write(kb)
			space()
			b.WriteByte(':')
			space()
			writePermuted(b, v[k], rng)
			space()
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			writePermuted(b, e, rng)
			space()
		}
		b.WriteByte(']')
	default:
		enc, err := json.Marshal(v)
		if err != nil {
			panic(err) // a value decoded from JSON always encodes
		}
		b.Write(enc)
	}
}
