package dirfs_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/google/go-cmp/cmp"
)

var (
	crashTrials = flag.Int("dirfs.crashtrials", 10, "trials of TestCrashDuringCheckpoint (each kills a capturing process once)")
	crashSync   = flag.Bool("dirfs.crashsync", false, "make the child of TestCrashDuringCheckpoint fsync (slower; SIGKILL does not need it)")
)

// crashStoreEnv, when set, makes TestCrashDuringCheckpoint the child: it
// captures into the store it names until it is killed.
const crashStoreEnv = "DIRFS_CRASH_STORE"

// TestCrashDuringCheckpoint kills a process with SIGKILL at a random moment
// while it edits a workspace and checkpoints it in a loop, then requires
// that every ref in the store verifies and restores completely — exactly
// the tree the child saw when the capture returned, where the child lived to
// record it — and that GC afterwards keeps every ref intact.
func TestCrashDuringCheckpoint(t *testing.T) {
	if store := os.Getenv(crashStoreEnv); store != "" {
		crashChild(t, store)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	total := 0
	for trial := range *crashTrials {
		store := filepath.Join(t.TempDir(), "store")
		delay := time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
		n := crashTrial(t, store, delay)
		total += n
		t.Logf("trial %d: killed after %v, %d refs intact", trial, delay.Round(time.Millisecond), n)
	}
	if total == 0 {
		t.Error("no trial left a checkpoint to check")
	}
}

// crashTrial runs one child, kills it after delay, and checks the store. It
// returns the number of refs checked.
func crashTrial(t *testing.T, store string, delay time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringCheckpoint$", "-test.count=1", "-dirfs.crashsync="+strconv.FormatBool(*crashSync))
	cmd.Env = append(os.Environ(), crashStoreEnv+"="+store)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			t.Fatal("child exited before it was ready")
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child not ready after 60s")
	}
	time.Sleep(delay)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx := context.Background()
	d := dirfs.New(dirfs.Config{Store: store})
	check := func(stage string) int {
		refs, err := d.Checkpoints()
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			if err := d.Verify(ctx, ref); err != nil {
				t.Fatalf("%s: Verify(%s): %v", stage, ref, err)
			}
			w, b, err := d.Create(ctx, ref)
			if err != nil {
				t.Fatalf("%s: Create(%s): %v", stage, ref, err)
			}
			if data, err := os.ReadFile(filepath.Join(store, "expect", ref)); err == nil {
				want, err := decodeTree(data)
				if err != nil {
					t.Fatalf("expectation of %s: %v", ref, err)
				}
				if diff := cmp.Diff(want, listTree(t, w.Dir())); diff != "" {
					t.Fatalf("%s: Create(%s) differs from the tree at capture (-want +got):\n%s", stage, ref, diff)
				}
			}
			_ = w.Close()
			if err := d.RemoveWorkspace(b); err != nil {
				t.Fatal(err)
			}
		}
		return len(refs)
	}
	checkBlobNames(t, store)
	n := check("after the kill")
	if _, err := d.GC(ctx); err != nil {
		t.Fatalf("GC after the kill: %v", err)
	}
	if des, _ := os.ReadDir(filepath.Join(store, "tmp")); len(des) != 0 {
		t.Errorf("GC left %d temporary files", len(des))
	}
	if m := check("after GC"); m != n {
		t.Errorf("GC changed the number of refs from %d to %d", n, m)
	}
	return n
}

// checkBlobNames checks the store's invariant that a blob is under its
// final name only when complete: every file in blobs/ hashes to its name,
// whether or not a manifest references it.
func checkBlobNames(t *testing.T, store string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(store, "blobs"), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != de.Name() {
			t.Errorf("blob %s holds %d bytes that hash to %x: a partial blob under a final name", de.Name(), len(data), sum)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// crashChild edits and checkpoints a workspace until it is killed (or 60 s
// pass). After each checkpoint it records the tree it captured under
// <store>/expect/<ref>, atomically. A SIGKILL keeps the page cache, so
// fsync does not matter to what survives it; without it the child captures
// faster and the kill lands in more phases of a capture.
func crashChild(t *testing.T, store string) {
	ctx := context.Background()
	d := dirfs.New(dirfs.Config{Store: store, NoSync: !*crashSync})
	w, _, err := d.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	expect := filepath.Join(store, "expect")
	if err := os.MkdirAll(expect, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	content := func() []byte {
		size := rng.IntN(2048)
		if rng.IntN(40) == 0 {
			size = 1<<20 + rng.IntN(1<<20) // now and then a file past smallFile
		}
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	edit := func(n int) {
		for range n {
			name := fmt.Sprintf("d%d/f%d", rng.IntN(8), rng.IntN(25))
			switch rng.IntN(10) {
			case 0:
				_ = w.RemoveAll(name)
			case 1:
				_ = w.MkdirAll(fmt.Sprintf("d%d/empty%d", rng.IntN(8), rng.IntN(5)), 0o755)
			case 2:
				_ = w.Remove("link" + strconv.Itoa(rng.IntN(4)))
				_ = w.Symlink(name, "link"+strconv.Itoa(rng.IntN(4)))
			default:
				if err := w.WriteFile(name, content()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	edit(80)
	if _, err := d.Checkpoint(ctx, w); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		edit(10 + rng.IntN(40))
		ref, err := d.Checkpoint(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		data, err := encodeTree(listTree(t, w.Dir()))
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(expect, ref+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(expect, ref)); err != nil {
			t.Fatal(err)
		}
	}
}

// jsonNode is a node as JSON; Data is []byte so that file contents that are
// not UTF-8 survive.
type jsonNode struct {
	Kind   byte
	Mode   fs.FileMode
	Data   []byte
	Target string
}

func encodeTree(tree map[string]node) ([]byte, error) {
	out := make(map[string]jsonNode, len(tree))
	for p, n := range tree {
		out[p] = jsonNode{n.Kind, n.Mode, []byte(n.Data), n.Target}
	}
	return json.Marshal(out)
}

func decodeTree(data []byte) (map[string]node, error) {
	var in map[string]jsonNode
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, err
	}
	tree := make(map[string]node, len(in))
	for p, n := range in {
		tree[p] = node{n.Kind, n.Mode, string(n.Data), n.Target}
	}
	return tree, nil
}
