// Command chat serves the chat agent of package chat and drives a
// conversation with it, each from its own process, on a Postgres store
// (two processes cannot share a Pebble folder):
//
//	chat serve -pg URL [-schema S] -model URL -name NAME   # serves until killed
//	chat start -pg URL [-schema S] [-wait 1m]              # prints the new conversation's ID
//	chat say   -pg URL [-schema S] -id ID -n N LINE        # sends turn N, prints the reply
//	chat say   -pg URL [-schema S] -id ID /bye             # ends the conversation
//
// The serving process may be killed at any moment (SIGKILL included) and
// another started: the conversation goes on where it was, and no model call
// is made twice — each reply is an llm step recorded through sdk.Transport,
// replayed by the next process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/examples/chat"
	"github.com/forkline/forkline/sdk"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

// errUsage is a command line chat does not understand.
var errUsage = errors.New("usage: chat serve|start|say -pg URL [flags] (chat CMD -h lists them)")

// run runs the command args, writing what it prints to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd := args[0]
	fs := flag.NewFlagSet("chat "+cmd, flag.ContinueOnError)
	pg := fs.String("pg", os.Getenv("FORKLINE_POSTGRES"), "Postgres URL of the store (default $FORKLINE_POSTGRES)")
	schema := fs.String("schema", "", "Postgres schema of the store (default: the store's)")
	var (
		model, name, owner *string
		park, lease, wait  *time.Duration
		idText             *string
		turn               *int
	)
	switch cmd {
	case "serve":
		model = fs.String("model", "", "the model's chat completions URL")
		name = fs.String("name", "chat-model", "the model's name")
		owner = fs.String("owner", "", "this process's owner name (default: the host's)")
		park = fs.Duration("park", time.Second, "how long a Recv waits before its dispatch parks")
		lease = fs.Duration("lease", sdk.DefaultLeaseTTL, "how long a claim lasts without renewal")
	case "start":
		wait = fs.Duration("wait", time.Minute, "how long the agent waits for each line")
	case "say":
		idText = fs.String("id", "", "the conversation's execution ID")
		turn = fs.Int("n", 0, "the turn's number, from 1 (its MessageID: saying it again sends it once)")
		wait = fs.Duration("wait", time.Minute, "how long to wait for the reply")
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *pg == "" {
		return fmt.Errorf("%w: -pg is needed", errUsage)
	}
	var popts []pgstore.Option
	if *schema != "" {
		popts = append(popts, pgstore.WithSchema(*schema))
	}
	store, err := pgstore.Open(ctx, *pg, popts...)
	if err != nil {
		return err
	}
	defer store.Close()

	if cmd == "serve" {
		opts := []sdk.Option{sdk.ParkAfter(*park), sdk.WithLeaseTTL(*lease)}
		if *owner != "" {
			opts = append(opts, sdk.WithOwner(*owner))
		}
		k, err := sdk.New(store, opts...)
		if err != nil {
			return err
		}
		defer k.Close()
		if _, err := chat.RegisterHTTP(k, chat.HTTPModel{Endpoint: *model, Name: *name}); err != nil {
			return err
		}
		fmt.Fprintln(out, "serving")
		if err := k.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}

	// The driving kernel never runs the agent; it registers it so that
	// Start checks the input.
	k, err := sdk.New(store)
	if err != nil {
		return err
	}
	defer k.Close()
	if _, err := chat.Register(k, func(context.Context, chat.Prompt) (string, error) {
		return "", errors.New("chat: the driving process does not run the conversation")
	}); err != nil {
		return err
	}
	switch cmd {
	case "start":
		if fs.NArg() != 0 {
			return fmt.Errorf("%w: start takes no arguments", errUsage)
		}
		id, err := k.Start(ctx, chat.Agent, chat.Input{Wait: *wait})
		if err != nil {
			return err
		}
		fmt.Fprintln(out, id)
		return nil
	default: // say
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: say takes one line", errUsage)
		}
		id, err := eventlog.ParseID(*idText)
		if err != nil {
			return fmt.Errorf("-id: %w", err)
		}
		line := fs.Arg(0)
		if line == chat.Bye {
			return k.Send(ctx, id, chat.Topic, chat.Bye, sdk.MessageID("bye"))
		}
		if *turn < 1 {
			return fmt.Errorf("%w: -n %d: turns count from 1", errUsage, *turn)
		}
		reply, err := chat.Say(ctx, k, id, *turn, line, *wait)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, reply)
		return nil
	}
}
