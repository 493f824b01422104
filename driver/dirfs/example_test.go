package dirfs_test

import (
	"context"
	"fmt"
	"os"

	"github.com/forkline/forkline/driver/dirfs"
)

// A workspace is checkpointed after a change and a fork restores it, while
// the original moves on.
func Example() {
	store, _ := os.MkdirTemp("", "dirfs-example")
	defer os.RemoveAll(store)
	ctx := context.Background()
	d := dirfs.New(dirfs.Config{Store: store})

	ws, _, err := d.Create(ctx, "") // the initial environment: empty
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = ws.WriteFile("notes/todo.txt", []byte("write the tests"))
	ref, err := d.Checkpoint(ctx, ws)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = ws.WriteFile("notes/todo.txt", []byte("tests written"))

	fork, _, err := d.Create(ctx, ref)
	if err != nil {
		fmt.Println(err)
		return
	}
	before, _ := fork.ReadFile("notes/todo.txt")
	after, _ := ws.ReadFile("notes/todo.txt")
	fmt.Printf("fork: %s\noriginal: %s\n", before, after)
	fmt.Println(d.Verify(ctx, ref))
	// Output:
	// fork: write the tests
	// original: tests written
	// <nil>
}
