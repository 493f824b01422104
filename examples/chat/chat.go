// Package chat is a chat agent that talks with a person through messages
// (DESIGN §18): it loops sdk.Recv of the person's next line → a model call
// → sdk.SetEvent of the reply, and ends on "/bye" or when no line comes
// within its timeout. Converse drives it from another process: it sends
// each line with Kernel.Send and reads each reply with Kernel.GetEvent. A
// kill between turns loses nothing and repeats no model call: the
// received lines and the model's replies are recorded steps. The kernel
// that starts a conversation must have the agent registered (Start checks
// the input), though only the serving one runs it.
//
// RegisterHTTP asks a model served over HTTP (OpenAI's chat completions,
// streamed) through sdk.Transport: each reply is an llm step whose stream
// reaches the agent as it arrives and is recorded whole. The program in
// cmd/chat serves the agent and drives a conversation from the command
// line, one process each, on a Postgres store.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Agent is the agent's name.
const Agent = "chat"

// Topic is the topic the person's lines are sent on.
const Topic = "user"

// Bye ends the conversation.
const Bye = "/bye"

// Input configures a conversation.
type Input struct {
	// Wait is how long the agent waits for each line (0: a minute).
	Wait time.Duration `json:"wait"`
}

// Output is the conversation as it happened.
type Output struct {
	Turns []Turn `json:"turns"`
	// Ended says why it ended: "bye" or "timeout".
	Ended string `json:"ended"`
}

// Turn is one line of the person's and the model's reply.
type Turn struct {
	User  string `json:"user"`
	Reply string `json:"reply"`
}

// Prompt is what the model is asked: the conversation so far and the new
// line.
type Prompt struct {
	History []Turn `json:"history"`
	Line    string `json:"line"`
}

// Model answers a prompt. A real one calls an LLM; tests fake it.
type Model func(ctx context.Context, p Prompt) (string, error)

// ReplyKey is the event key the reply to turn n (1-based) is published
// under; "reply" always holds the newest reply and "turns" the count.
func ReplyKey(n int) string { return fmt.Sprintf("reply-%d", n) }

// Register registers the chat agent with k, answering with model. The
// model call is a tool step (safe to retry: asking a model again has no
// effect): its recorded reply replays, so a run resumed after a kill calls
// the model only for the turns it had not answered.
func Register(k *sdk.Kernel, model Model) (*sdk.Agent[Input, Output], error) {
	if model == nil {
		return nil, fmt.Errorf("%w: chat: nil model", sdk.ErrInvalid)
	}
	ask := sdk.DefineTool("model", func(ctx context.Context, p Prompt) (string, error) { return model(ctx, p) })
	return register(k, ask.Call)
}

// register registers the chat agent with k, asking the model with ask
// (called with the handler's context).
func register(k *sdk.Kernel, ask Model) (*sdk.Agent[Input, Output], error) {
	return sdk.Register(k, Agent, func(ctx context.Context, in Input) (Output, error) {
		wait := in.Wait
		if wait <= 0 {
			wait = time.Minute
		}
		var out Output
		for {
			line, err := sdk.Recv[string](ctx, Topic, wait)
			switch {
			case errors.Is(err, sdk.ErrTimeout):
				out.Ended = "timeout"
				return out, nil
			case err != nil:
				return out, err
			case line == Bye:
				out.Ended = "bye"
				return out, nil
			}
			reply, err := ask(ctx, Prompt{History: out.Turns, Line: line})
			if err != nil {
				return out, err
			}
			out.Turns = append(out.Turns, Turn{User: line, Reply: reply})
			n := len(out.Turns)
			for _, set := range []struct {
				key string
				v   any
			}{{ReplyKey(n), reply}, {"reply", reply}, {"turns", n}} {
				if err := sdk.SetEvent(ctx, set.key, set.v); err != nil {
					return out, err
				}
			}
		}
	})
}

// Say sends line as turn n (1-based) of conversation id and waits up to
// wait for the reply. The MessageID is the turn's, so that saying a turn
// again (a driver that crashed after sending) sends it once.
func Say(ctx context.Context, k *sdk.Kernel, id eventlog.ID, n int, line string, wait time.Duration) (string, error) {
	if err := k.Send(ctx, id, Topic, line, sdk.MessageID(fmt.Sprintf("turn-%d", n))); err != nil {
		return "", err
	}
	b, err := k.GetEvent(ctx, id, ReplyKey(n), wait)
	if err != nil {
		return "", err
	}
	var reply string
	if err := json.Unmarshal(b, &reply); err != nil {
		return "", fmt.Errorf("chat: reply %d of %s: %w", n, id, err)
	}
	return reply, nil
}

// Converse says each of lines in turn and returns the replies, then says
// Bye.
func Converse(ctx context.Context, k *sdk.Kernel, id eventlog.ID, lines []string, wait time.Duration) ([]string, error) {
	var replies []string
	for i, line := range lines {
		r, err := Say(ctx, k, id, i+1, line, wait)
		if err != nil {
			return replies, err
		}
		replies = append(replies, r)
	}
	return replies, k.Send(ctx, id, Topic, Bye, sdk.MessageID("bye"))
}
