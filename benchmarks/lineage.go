package benchmarks

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/vmihailenco/msgpack/v5"
)

// This file builds the long executions the scenarios replay, fork and fold,
// and keeps a raw Pebble copy of their records for the baselines.

// appendBatch is how many events the builders write per Append.
const appendBatch = 5_000

// buildTime is the time stamped on built events: a fixed instant, so that
// records of the same workload have the same bytes in every run.
var buildTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// appendAll appends events to id (whose head is head) in batches.
func appendAll(ctx context.Context, log eventlog.Log, id eventlog.ID, head uint64, events []eventlog.Event) (uint64, error) {
	for len(events) > 0 {
		n := min(len(events), appendBatch)
		h, err := log.Append(ctx, id, head, events[:n]...)
		if err != nil {
			return head, err
		}
		head, events = h, events[n:]
	}
	return head, nil
}

// The replay workload: the reference page's coder agent reading files, as
// recorded runs of [replayAgent] hold them. Its tool is read_file with the
// path as argument, its result the file's text.

const (
	replayAgent = "reader"
	replayTool  = "read_file"
)

// readArgs is the argument of read_file.
type readArgs struct {
	Path string `json:"path"`
}

// replayInput is the input of replayAgent: how many files to read.
type replayInput struct {
	Files int `json:"files"`
}

func replayPath(i int) string { return fmt.Sprintf("src/pkg%03d/file%06d.go", i%997, i) }

// replayResult is the recorded result of reading file i: a JSON string of
// about 100 bytes, as a short source file would be.
func replayResult(i int) []byte {
	b, _ := json.Marshal(fmt.Sprintf("package pkg%03d\n\n// File %06d holds one function.\nfunc F%06d() int { return %d }\n", i%997, i, i, i))
	return b
}

// buildReplay writes an execution of replayAgent that recorded steps
// read_file calls in its first dispatch and has not completed: its Run
// replays every call and runs nothing live. The events are written in large
// appends with the step IDs the SDK computes ([sdk.StepID]), so that half a
// million steps take seconds to build; runReplay checks that nothing runs
// live, which would show an ID that does not match.
//
// With retried, every call's first attempt failed and was retried
// (step.failed with RetryAt, DESIGN §10), and its second succeeded: four
// events a step instead of two.
func buildReplay(ctx context.Context, log eventlog.Log, steps int, retried bool) (eventlog.ID, uint64, error) {
	return buildReplayOf(ctx, log, steps, steps, retried)
}

// buildReplayOf is buildReplay of an execution whose input asks for files
// reads, of which the first steps are recorded (files ≥ steps).
func buildReplayOf(ctx context.Context, log eventlog.Log, steps, files int, retried bool) (eventlog.ID, uint64, error) {
	in, err := json.Marshal(replayInput{Files: files})
	if err != nil {
		return eventlog.ID{}, 0, err
	}
	id, err := log.Create(ctx, &eventlog.ExecutionCreated{Agent: replayAgent, Input: in}, buildTime)
	if err != nil {
		return eventlog.ID{}, 0, err
	}
	head := uint64(1)
	events := make([]eventlog.Event, 0, appendBatch+2)
	add := func(p eventlog.Payload) { events = append(events, eventlog.Event{Time: buildTime, Data: p}) }
	add(&eventlog.DispatchStarted{Dispatch: 1})
	for i := range steps {
		args, err := json.Marshal(readArgs{Path: replayPath(i)})
		if err != nil {
			return eventlog.ID{}, 0, err
		}
		stepID := sdk.StepID(eventlog.StepTool, replayTool, args, 0)
		add(&eventlog.StepStarted{StepID: stepID, StepKind: eventlog.StepTool, Target: replayTool, Args: args,
			Idempotency: eventlog.SafeToRetry, Attempt: 1})
		if retried {
			add(&eventlog.StepFailed{StepID: stepID, Error: "503 unavailable", RetryAt: buildTime.Add(time.Second)})
			add(&eventlog.StepStarted{StepID: stepID, StepKind: eventlog.StepTool, Target: replayTool, Args: args,
				Idempotency: eventlog.SafeToRetry, Attempt: 2})
		}
		add(&eventlog.StepSucceeded{StepID: stepID, Result: replayResult(i)})
		if len(events) >= appendBatch {
			if head, err = appendAll(ctx, log, id, head, events); err != nil {
				return eventlog.ID{}, 0, err
			}
			events = events[:0]
		}
	}
	if head, err = appendAll(ctx, log, id, head, events); err != nil {
		return eventlog.ID{}, 0, err
	}
	return id, head, nil
}

// The history workload: a long run of the coder agent (DESIGN §7) with its
// workspace resource, as scenarios 4 and 5 fork and fold it. One workspace
// with EverySteps(5) and no CoverageReuse; each turn is an LLM call followed
// by a write_file (which affects the workspace) or a read_file, alternating
// by a fixed pattern; a capture is committed with every fifth write; a new
// dispatch every 1,000 turns.

const historyAgent = "coder"

// buildHistory writes a coder-agent execution of exactly n events (n ≥ 4).
func buildHistory(ctx context.Context, log eventlog.Log, n int) (eventlog.ID, error) {
	id, err := log.Create(ctx, &eventlog.ExecutionCreated{Agent: historyAgent, Input: []byte(`{"task":"refactor"}`)}, buildTime)
	if err != nil {
		return eventlog.ID{}, err
	}
	head := uint64(1)
	events := make([]eventlog.Event, 0, appendBatch+8)
	total := 1
	add := func(p eventlog.Payload) bool {
		if total >= n {
			return false
		}
		events = append(events, eventlog.Event{Time: buildTime, Data: p})
		total++
		return true
	}
	flush := func() error {
		var err error
		head, err = appendAll(ctx, log, id, head, events)
		events = events[:0]
		return err
	}
	const ws = "workspace"
	add(&eventlog.DispatchStarted{Dispatch: 1})
	add(&eventlog.ResourceBound{Key: ws, DriverID: "forkline.dirfs.v1", Configuration: json.RawMessage(`{"store":"/var/lib/ws"}`),
		Binding: json.RawMessage(`{"workspace":"0123456789abcdef0123456789abcdef"}`), EverySteps: 5, OnCompletion: true})
	gen := uint64(1)
	add(&eventlog.ResourceCaptured{Key: ws, Ref: "ref-baseline", Generation: gen, Reason: eventlog.CaptureBaseline})
	writes, dispatch := 0, uint64(1)
	step := func(turn int, kind eventlog.StepKind, target string, args, result []byte, affects ...string) bool {
		stepID := fmt.Sprintf("%s-%08d", target, turn)
		if !add(&eventlog.StepStarted{StepID: stepID, StepKind: kind, Target: target, Args: args, Resources: affects,
			Idempotency: eventlog.SafeToRetry, Attempt: 1}) {
			return false
		}
		gen++
		return add(&eventlog.StepSucceeded{StepID: stepID, Result: result})
	}
	for turn := 1; total < n; turn++ {
		if turn%1000 == 0 {
			dispatch++
			add(&eventlog.DispatchStarted{Dispatch: dispatch})
		}
		path := []byte(fmt.Sprintf(`{"path":"src/file%04d.go"}`, turn%5000))
		if !step(turn, eventlog.StepLLM, "gpt-5", []byte(`{"messages":[{"role":"user","content":"next"}],"model":"gpt-5"}`),
			[]byte(`{"choices":[{"message":{"content":"call a tool"}}]}`)) {
			break
		}
		if turn%3 == 0 {
			step(turn, eventlog.StepTool, "read_file", path, []byte(`"package main\n"`))
		} else {
			step(turn, eventlog.StepTool, "write_file", path, []byte(`"wrote"`), ws)
			if writes++; writes == 5 {
				writes = 0
				add(&eventlog.ResourceCaptured{Key: ws, Ref: fmt.Sprintf("ref-%08d", turn), Generation: gen, Reason: eventlog.CaptureSteps})
			}
		}
		if len(events) >= appendBatch {
			if err := flush(); err != nil {
				return eventlog.ID{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return eventlog.ID{}, err
	}
	if head != uint64(n) {
		return eventlog.ID{}, fmt.Errorf("%w: history has %d events, want %d", errCheck, head, n)
	}
	return id, nil
}

// rawStore is a plain Pebble database that holds copies of event records
// under the same keys the forkline store uses ('e', execution ID, seq): the
// baselines scan, decode and copy them with nothing of forkline in the way.
type rawStore struct {
	db *pebble.DB
}

// rawCopy opens a raw store in dir holding a copy of execution id's
// lineage of log, which must have head events: the baseline that replay
// scenarios scan and decode.
func rawCopy(ctx context.Context, dir string, log eventlog.Log, id eventlog.ID, head uint64) (*rawStore, error) {
	raw, err := openRaw(dir)
	if err != nil {
		return nil, err
	}
	n, err := raw.copyFrom(ctx, log, id)
	if err == nil && uint64(n) != head {
		err = fmt.Errorf("%w: raw copy has %d events, the execution %d", errCheck, n, head)
	}
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	return raw, nil
}

func openRaw(dir string) (*rawStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("raw pebble: %w", err)
	}
	return &rawStore{db: db}, nil
}

func (r *rawStore) Close() error { return r.db.Close() }

// rawKey is the key of event seq of execution id.
func rawKey(id eventlog.ID, seq uint64) []byte {
	k := make([]byte, 0, 25)
	k = append(k, 'e')
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// rawBounds are the iterator bounds of execution id's events.
func rawBounds(id eventlog.ID) *pebble.IterOptions {
	lo := append([]byte{'e'}, id[:]...)
	hi := append([]byte{'e'}, id[:]...)
	for i := len(hi) - 1; i >= 0; i-- {
		if hi[i]++; hi[i] != 0 {
			break
		}
	}
	return &pebble.IterOptions{LowerBound: lo, UpperBound: hi}
}

// copyFrom stores the records of id's lineage, read from log and encoded
// again with [eventlog.AppendRecord] (the bytes the store holds), under the
// same ID, and returns how many there are.
func (r *rawStore) copyFrom(ctx context.Context, log eventlog.Log, id eventlog.ID) (int, error) {
	b := r.db.NewBatch()
	n := 0
	var rec []byte
	for ev, err := range log.Events(ctx, id, 1) {
		if err != nil {
			b.Close()
			return 0, err
		}
		if rec, err = eventlog.AppendRecord(rec[:0], id, ev); err != nil {
			b.Close()
			return 0, err
		}
		_ = b.Set(rawKey(id, ev.Seq), rec, nil)
		n++
		if b.Len() > 32<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return 0, err
			}
			b = r.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, err
	}
	return n, r.db.Flush()
}

// scanDecode reads every record of id and decodes its payload with one
// reused msgpack decoder into a fresh payload of its kind — the least any
// reader of a stored lineage pays per event, the ceiling of the folds. It
// returns the number of events.
func (r *rawStore) scanDecode(id eventlog.ID) (int, error) {
	it, err := r.db.NewIter(rawBounds(id))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	dec := msgpack.NewDecoder(nil)
	rd := bytes.NewReader(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) < 14 {
			return n, fmt.Errorf("%w: raw record of %d bytes", errCheck, len(v))
		}
		p := payloadOf(eventlog.Kind(v[1]))
		if p == nil {
			return n, fmt.Errorf("%w: raw record of kind %d", errCheck, v[1])
		}
		rd.Reset(v[14:])
		dec.Reset(rd)
		if err := dec.Decode(p); err != nil {
			return n, fmt.Errorf("raw decode: %w", err)
		}
		n++
	}
	return n, it.Error()
}

// copyPrefix copies events 1..at of from to a new execution id to, as an
// engine whose forks copy the prefix does, and syncs the copy.
func (r *rawStore) copyPrefix(from, to eventlog.ID, at uint64) (int, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: rawKey(from, 1), UpperBound: rawKey(from, at+1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := r.db.NewBatch()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		_ = b.Set(rawKey(to, binary.BigEndian.Uint64(k[17:25])), it.Value(), nil)
		n++
		if b.Len() > 32<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return n, err
			}
			b = r.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		b.Close()
		return n, err
	}
	return n, b.Commit(pebble.Sync)
}

// deleteExecution removes the records of id (a copied prefix) so that the
// copies do not pile up between rounds.
func (r *rawStore) deleteExecution(id eventlog.ID) error {
	o := rawBounds(id)
	return r.db.DeleteRange(o.LowerBound, o.UpperBound, pebble.NoSync)
}

// payloadOf returns a new, empty payload of kind k, or nil for an unknown
// kind.
func payloadOf(k eventlog.Kind) any {
	switch k {
	case eventlog.KindExecutionCreated:
		return new(eventlog.ExecutionCreated)
	case eventlog.KindDispatchStarted:
		return new(eventlog.DispatchStarted)
	case eventlog.KindStepStarted:
		return new(eventlog.StepStarted)
	case eventlog.KindStepSucceeded:
		return new(eventlog.StepSucceeded)
	case eventlog.KindStepFailed:
		return new(eventlog.StepFailed)
	case eventlog.KindStepCancelled:
		return new(eventlog.StepCancelled)
	case eventlog.KindStepDenied:
		return new(eventlog.StepDenied)
	case eventlog.KindResourceBound:
		return new(eventlog.ResourceBound)
	case eventlog.KindResourceCaptured:
		return new(eventlog.ResourceCaptured)
	case eventlog.KindResourceCaptureFailed:
		return new(eventlog.ResourceCaptureFailed)
	case eventlog.KindExecutionCompleted:
		return new(eventlog.ExecutionCompleted)
	case eventlog.KindExecutionFailed:
		return new(eventlog.ExecutionFailed)
	case eventlog.KindForkCreated:
		return new(eventlog.ForkCreated)
	}
	return nil
}

// quietLogger drops Pebble's informational messages and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
