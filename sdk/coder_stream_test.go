package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// replies collects what coder.Model.OnReply is given, by turn.
type replies struct {
	mu     sync.Mutex
	pieces map[int][]string
	done   []int
}

func (r *replies) on(turn int, piece string, done bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pieces == nil {
		r.pieces = map[int][]string{}
	}
	if done {
		r.done = append(r.done, turn)
		return
	}
	r.pieces[turn] = append(r.pieces[turn], piece)
}

func (r *replies) text(turn int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.pieces[turn], "")
}

// TestCoderStreams: the coder agent with Stream records each model call as
// a stream (issue 32: the demo's built-in model streams) with the event
// sequence of the unstreamed run; each step.succeeded holds the whole
// server-sent body and the usage chunk's tokens; OnReply sees each live
// reply in pieces and once; a fork at a streamed reply edited with
// WithToolArgs replays the edited stream to openai-go's parser, which
// writes the other file, and OnReply sees only the fork's live replies.
func TestCoderStreams(t *testing.T) {
	ctx := context.Background()
	rig := newCoderRig(t)
	var seen replies
	rig.m.Stream, rig.m.OnReply = true, seen.on
	k := newKernel(t, newStore(t), rig.register)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	if diff := cmp.Diff(coderFirstRun, describeAll(evs)); diff != "" {
		t.Fatalf("event sequence (-want +got):\n%s", diff)
	}
	llm := map[string]bool{}
	var replySeqs []uint64
	var replyIDs []string
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.StepKind == eventlog.StepLLM {
				llm[p.StepID] = true
				var req struct {
					Body struct {
						Stream        bool `json:"stream"`
						StreamOptions struct {
							IncludeUsage bool `json:"include_usage"`
						} `json:"stream_options"`
					} `json:"body"`
				}
				if err := json.Unmarshal(p.Args, &req); err != nil || !req.Body.Stream || !req.Body.StreamOptions.IncludeUsage {
					t.Fatalf("llm step %s args %s: want a streamed request asking for usage (%v)", p.StepID, p.Args, err)
				}
			}
		case *eventlog.StepSucceeded:
			if !llm[p.StepID] {
				continue
			}
			var res struct {
				Status int    `json:"status"`
				Body   []byte `json:"body"`
			}
			if err := json.Unmarshal(p.Result, &res); err != nil {
				t.Fatal(err)
			}
			if res.Status != 200 || !strings.HasPrefix(string(res.Body), "data: ") || !strings.HasSuffix(string(res.Body), "data: [DONE]\n\n") || p.Truncated {
				t.Fatalf("llm step %s: status %d, truncated %v, body %.80q…: want the whole stream", p.StepID, res.Status, p.Truncated, res.Body)
			}
			if p.Tokens != (eventlog.Tokens{Input: 10, Output: 10}) {
				t.Fatalf("llm step %s: tokens %+v, want the usage chunk's 10 in, 10 out", p.StepID, p.Tokens)
			}
			replySeqs, replyIDs = append(replySeqs, ev.Seq), append(replyIDs, p.StepID)
		}
	}
	if len(replySeqs) != 12 {
		t.Fatalf("%d model replies recorded, want 12", len(replySeqs))
	}
	if got, want := seen.text(1), `→ write_file {"path":"go.mod","content":"module example.com/greet\n\ngo 1.26\n"}`; got != want {
		t.Fatalf("turn 1 as OnReply saw it: %q, want %q", got, want)
	}
	if n := len(seen.pieces[1]); n < 4 {
		t.Fatalf("turn 1 arrived in %d pieces; want it streamed in several", n)
	}
	if got := seen.text(12); !strings.HasPrefix(got, "Built the greet module") {
		t.Fatalf("turn 12 as OnReply saw it: %q", got)
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !cmp.Equal(seen.done, want) {
		t.Fatalf("OnReply's ends: %v, want %v", seen.done, want)
	}

	// Fork at the second reply (write_file greet.go) edited to write
	// hello.go: the edited stream replays, the rest runs live.
	seen = replies{}
	fid, err := k.Fork(ctx, id, replySeqs[1], sdk.WithToolArgs(replyIDs[1], "write_file", fork.ToolArg{Key: "path", Value: json.RawMessage(`"hello.go"`)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	var wrote []string
	for _, ev := range events(t, k, fid) {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && ev.Seq > replySeqs[1] && p.Target == "write_file" {
			var a coder.WriteArgs
			if err := json.Unmarshal(p.Args, &a); err != nil {
				t.Fatal(err)
			}
			wrote = append(wrote, a.Path)
		}
	}
	if len(wrote) == 0 || wrote[0] != "hello.go" {
		t.Fatalf("the fork's writes after the edited reply: %v, want hello.go first", wrote)
	}
	if seen.pieces[1] != nil || seen.pieces[2] != nil {
		t.Fatalf("OnReply saw replayed replies: %v", seen.pieces)
	}
	if seen.text(3) == "" || seen.done[0] != 3 {
		t.Fatalf("OnReply in the fork: ends %v, turn 3 %q; want the live replies from turn 3", seen.done, seen.text(3))
	}
}
