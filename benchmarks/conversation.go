package benchmarks

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/workload"
)

// Scenario 9, conversation storage (DESIGN §14): an agent's LLM calls over
// a conversation of ConversationTurns turns, each request holding every
// earlier message (internal/workload.Conversation: 2.2 KB of new text a
// turn on average). Each call is one synced append of step.started (the
// request as its args) and step.succeeded. The contestants are the same
// store with chunked values (the default) and without (ChunkAbove(0):
// every record whole, as before). Each measured op appends one whole
// conversation with fresh text, into a new execution of the same store;
// the rate is calls per second. The storage figure is what one
// conversation leaves in a fresh store (its events, index entries and
// chunks), over its unique bytes (the last request: all its text once).

func runConversation(e *env) ([]Row, error) {
	dir, err := e.mkdir("conversation")
	if err != nil {
		return nil, err
	}
	turns := e.sizes.ConversationTurns
	chunked, err := pebblestore.Open(filepath.Join(dir, "chunked"))
	if err != nil {
		return nil, err
	}
	defer chunked.Close()
	whole, err := pebblestore.Open(filepath.Join(dir, "whole"), pebblestore.ChunkAbove(0))
	if err != nil {
		return nil, err
	}
	defer whole.Close()
	seed := uint64(0)
	appendOne := func(st *pebblestore.Store) op {
		return func() (float64, time.Duration, error) {
			seed++
			reqs, _ := workload.Conversation(turns, seed)
			took, err := appendConversation(e, st, reqs)
			return float64(len(reqs)), took, err
		}
	}
	rates, load, err := e.interleave(
		contestant{"forkline, chunked values", appendOne(chunked)},
		contestant{"forkline, whole values", appendOne(whole)},
	)
	if err != nil {
		return nil, err
	}
	f := Figure{What: "chunked", Value: median(rates[0]), Unit: "calls/s", Rounds: rates[0]}
	w := Figure{What: "whole records (before)", Value: median(rates[1]), Unit: "calls/s", Rounds: rates[1]}
	timeRow := rowOf("9a", fmt.Sprintf("append an LLM call of a %d-turn conversation, chunked vs whole", turns),
		"Conversation/values=chunked", f, w, inv, "time per call, chunked/whole", "≤ 1.3", atMost(1.3), load)
	timeRow.Note = "One synced append per call (step.started with the request, step.succeeded); each op a new conversation with new text."

	// Storage: one conversation in a fresh store of each kind.
	reqs, unique := workload.Conversation(turns, 1_000_000)
	sizes := make([]float64, 2)
	for i, opts := range [][]pebblestore.Option{nil, {pebblestore.ChunkAbove(0)}} {
		st, err := pebblestore.Open(filepath.Join(dir, fmt.Sprintf("size-%d", i)), opts...)
		if err != nil {
			return nil, err
		}
		_, err = appendConversation(e, st, reqs)
		if err == nil {
			sizes[i], err = storedBytes(e, st)
		}
		st.Close()
		if err != nil {
			return nil, err
		}
	}
	u := float64(unique)
	sf := Figure{What: "chunked", Value: sizes[0] / u, Unit: "× unique bytes", Rounds: []float64{sizes[0] / u}}
	sw := Figure{What: "whole records (before)", Value: sizes[1] / u, Unit: "× unique bytes", Rounds: []float64{sizes[1] / u}}
	sizeRow := rowOf("9b", fmt.Sprintf("bytes stored by a %d-turn conversation, over its unique bytes", turns),
		"Conversation/values=chunked", sf, sw, func(f, _ float64) float64 { return f }, "stored/unique, chunked", "≤ 3", atMost(3), load)
	sizeRow.Note = fmt.Sprintf("Unique: the last request, %s bytes. Stored: keys and values of the events, index entries and chunks (before Pebble's compression): %s chunked, %s whole.",
		humanNumber(u), humanNumber(sizes[0]), humanNumber(sizes[1]))
	return []Row{timeRow, sizeRow}, nil
}

// appendConversation appends one LLM call per request to a new execution
// of st and returns the time the appends took.
func appendConversation(e *env, st *pebblestore.Store, reqs [][]byte) (time.Duration, error) {
	id, err := st.Create(e.ctx, &eventlog.ExecutionCreated{Agent: "chat", Input: []byte(`{}`)}, time.Now())
	if err != nil {
		return 0, err
	}
	head := uint64(1)
	start := time.Now()
	for i, req := range reqs {
		step := fmt.Sprintf("llm-%d", i)
		head, err = st.Append(e.ctx, id, head,
			eventlog.Event{Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepLLM, Target: "chat/completions",
				Args: req, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			eventlog.Event{Data: &eventlog.StepSucceeded{StepID: step, Result: []byte(`{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)}})
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// storedBytes is what st holds: every execution's events and index
// entries, and the chunks.
func storedBytes(e *env, st *pebblestore.Store) (float64, error) {
	var n int64
	for u, err := range st.Usage(e.ctx) {
		if err != nil {
			return 0, err
		}
		n += u.Bytes
	}
	_, chunks, err := st.ChunkUsage(e.ctx)
	return float64(n + chunks), err
}
