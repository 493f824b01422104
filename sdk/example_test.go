package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// WriteArgs are the arguments of the examples' write_file tool.
type WriteArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// ExampleResource binds a workspace directory as a resource, writes to it
// through a tool that declares it, and shows the checkpoints taken: a
// baseline, one after every second write, and one at completion.
func ExampleResource() {
	ctx := context.Background()
	store, _ := os.MkdirTemp("", "forkline-example-")
	defer os.RemoveAll(store)

	k, _ := sdk.Open("") // an in-memory log
	defer k.Close()
	_, _ = sdk.Register(k, "writer", func(ctx context.Context, files []string) (int, error) {
		ws, err := sdk.Resource(ctx, "workspace", dirfs.New(dirfs.Config{Store: store}), sdk.EverySteps(2))
		if err != nil {
			return 0, err
		}
		write := sdk.DefineTool("write_file", func(ctx context.Context, a WriteArgs) (string, error) {
			return "wrote " + a.Path, ws.WriteFile(a.Path, []byte(a.Content))
		}, sdk.Affects("workspace"))
		for _, f := range files {
			if _, err := write.Call(ctx, WriteArgs{Path: f, Content: "hello " + f}); err != nil {
				return 0, err
			}
		}
		return len(files), nil
	})
	id, _ := k.Start(ctx, "writer", []string{"a.txt", "b.txt", "c.txt"})
	if _, err := k.Run(ctx, id); err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Seq, describe(ev))
	}
	// Output:
	// 1 created writer
	// 2 dispatch 1
	// 3 bound workspace every=2
	// 4 captured workspace baseline gen=1
	// 5 started tool write_file affects=workspace
	// 6 succeeded
	// 7 started tool write_file affects=workspace
	// 8 succeeded
	// 9 captured workspace steps gen=3
	// 10 started tool write_file affects=workspace
	// 11 succeeded
	// 12 captured workspace completion gen=4
	// 13 completed
}

// ExampleDefineTool shows that a recorded call is replayed, not run again: a
// fork after the tool's outcome returns the recorded result without calling
// the tool's body.
func ExampleDefineTool() {
	ctx := context.Background()
	k, _ := sdk.Open("")
	defer k.Close()
	calls := 0
	add := sdk.DefineTool("add", func(ctx context.Context, xs []int) (int, error) {
		calls++
		sum := 0
		for _, x := range xs {
			sum += x
		}
		return sum, nil
	})
	_, _ = sdk.Register(k, "adder", func(ctx context.Context, xs []int) (int, error) {
		return add.Call(ctx, xs)
	})
	id, _ := k.Start(ctx, "adder", []int{1, 2, 3})
	res, _ := k.Run(ctx, id)
	var sum int
	_ = res.Decode(&sum)
	fmt.Println("sum:", sum, "body calls:", calls)

	fork, _ := k.Fork(ctx, id, 4) // after the tool's step.succeeded
	res, _ = k.Run(ctx, fork)
	_ = res.Decode(&sum)
	fmt.Println("fork sum:", sum, "body calls:", calls)
	// Output:
	// sum: 6 body calls: 1
	// fork sum: 6 body calls: 1
}

// ExampleKernel_Fork forks an execution at the point where its workspace was
// covered, and shows what the fork restored and what it did live.
func ExampleKernel_Fork() {
	ctx := context.Background()
	store, _ := os.MkdirTemp("", "forkline-example-")
	defer os.RemoveAll(store)
	k, _ := sdk.Open("")
	defer k.Close()

	_, _ = sdk.Register(k, "notes", func(ctx context.Context, notes []string) ([]string, error) {
		ws, err := sdk.Resource(ctx, "workspace", dirfs.New(dirfs.Config{Store: store}))
		if err != nil {
			return nil, err
		}
		write := sdk.DefineTool("write_file", func(ctx context.Context, a WriteArgs) (string, error) {
			return "wrote " + a.Path, ws.WriteFile(a.Path, []byte(a.Content))
		}, sdk.Affects("workspace"))
		for i, n := range notes {
			if _, err := write.Call(ctx, WriteArgs{Path: fmt.Sprintf("note%d.txt", i), Content: n}); err != nil {
				return nil, err
			}
		}
		entries, err := ws.ReadDir(".")
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names, nil
	})
	id, _ := k.Start(ctx, "notes", []string{"buy milk", "call mum"})
	_, _ = k.Run(ctx, id)

	// Event 7 is the capture committed with the first write's outcome.
	pt, _ := k.Coverage(ctx, id, 7)
	fmt.Println("covered at 7:", pt.Covered)

	fork, _ := k.Fork(ctx, id, 7)
	res, err := k.Run(ctx, fork)
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	_ = res.Decode(&names)
	fmt.Println("fork's workspace:", names)
	// Output:
	// covered at 7: true
	// fork's workspace: [note0.txt note1.txt]
}

// ExampleKernel_Serve is how a runtime starts work and recovers it after a
// crash: Open, Register, Serve. The first process starts three executions
// and dies in the middle of the first (its dispatch is cut off after one
// step); the second opens the same log, registers the same agent and
// serves: every execution ends, the interrupted one resuming from its
// recorded step.
func ExampleKernel_Serve() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "forkline-serve-")
	defer os.RemoveAll(dir)

	register := func(k *sdk.Kernel) *sdk.Agent[string, string] {
		greet, _ := sdk.Register(k, "greet", func(ctx context.Context, name string) (string, error) {
			hello, err := sdk.Step(ctx, "hello", func(context.Context) (string, error) { return "hello " + name, nil })
			if err != nil {
				return "", err
			}
			if name == "ada" && crashNow(ctx) {
				return "", ctx.Err() // the process "dies" here, after one recorded step
			}
			return sdk.Step(ctx, "shout", func(context.Context) (string, error) { return hello + "!", nil })
		})
		return greet
	}

	// The first process.
	k, _ := sdk.Open(dir)
	greet := register(k)
	var ids []eventlog.ID
	for _, name := range []string{"ada", "grace", "barbara"} {
		id, _ := greet.Start(ctx, name, sdk.WithKey("greet-"+name))
		ids = append(ids, id)
	}
	runCtx, die := context.WithCancel(ctx)
	crashing = die
	_, err := greet.Run(runCtx, ids[0])
	fmt.Println("first process:", errors.Is(err, context.Canceled))
	_ = k.Close()

	// The second process: Open, Register, Serve.
	k, _ = sdk.Open(dir)
	defer k.Close()
	greet = register(k)
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Serve(serveCtx) }()
	for _, id := range ids {
		out, err := greet.Wait(ctx, id)
		fmt.Println(out, err)
	}
	stop()
	<-done
	// Output:
	// first process: true
	// hello ada! <nil>
	// hello grace! <nil>
	// hello barbara! <nil>
}

// crashing, when set, is called once by crashNow: ExampleKernel_Serve's
// stand-in for a process dying.
var crashing context.CancelFunc

func crashNow(ctx context.Context) bool {
	if crashing == nil {
		return false
	}
	crashing()
	crashing = nil
	return true
}
