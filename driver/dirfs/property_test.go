package dirfs_test

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestPropertyRestoreExact: for random trees (files, nested and empty
// directories, symbolic links, modes) and random edits (same-size rewrites
// included) with checkpoints between them, every checkpoint restores exactly
// the tree at capture time — also after later edits, GC, and through handles
// that lost their file index.
//
// Two set-ups: "coarse" acts out a file system with one-second timestamps
// and relies on the racy window; "incremental" has no racy window and gives
// every written file a fresh mtime, so most files take the index shortcut
// and the test exercises its bookkeeping (renames, removals, type changes).
func TestPropertyRestoreExact(t *testing.T) {
	t.Parallel()
	mask := currentUmask(t)
	t.Run("coarse", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		rapid.Check(t, func(rt *rapid.T) {
			m := newTreeMachine(rt, base, mask)
			dirfs.SetTimestampGranularity(m.d, time.Second)
			m.run(rt)
		})
	})
	t.Run("incremental", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		rapid.Check(t, func(rt *rapid.T) {
			m := newTreeMachine(rt, base, mask)
			dirfs.SetRacyWindow(m.d, 0)
			m.freshMtimes = true
			m.run(rt)
		})
	})
}

// treeMachine keeps a model of the workspace tree beside the real one.
type treeMachine struct {
	store       string
	d           *dirfs.Driver
	w           *dirfs.Workspace
	b           dirfs.Binding
	model       map[string]node
	captured    map[string]map[string]node // ref → tree at capture
	refs        []string                   // capture order
	umask       fs.FileMode
	freshMtimes bool
	tick        int64
}

func newTreeMachine(rt *rapid.T, base string, umask fs.FileMode) *treeMachine {
	store, err := os.MkdirTemp(base, "store")
	if err != nil {
		rt.Fatal(err)
	}
	// Durability against machine crashes is not what this test is about;
	// skipping fsync keeps it fast on a busy disk.
	d := dirfs.New(dirfs.Config{Store: store, NoSync: true})
	w, b, err := d.Create(context.Background(), "")
	if err != nil {
		rt.Fatal(err)
	}
	return &treeMachine{
		store: store, d: d, w: w, b: b, umask: umask,
		model:    map[string]node{},
		captured: map[string]map[string]node{},
	}
}

func (m *treeMachine) run(rt *rapid.T) {
	defer func() {
		_ = m.w.Close()
		makeWritable(m.store)
		_ = os.RemoveAll(m.store)
	}()
	rt.Repeat(map[string]func(*rapid.T){
		"write":           m.write,
		"rewriteSameSize": m.rewriteSameSize,
		"mkdir":           m.mkdir,
		"symlink":         m.symlink,
		"remove":          m.remove,
		"chmod":           m.chmod,
		"rename":          m.rename,
		"checkpoint":      m.checkpoint,
		"restore":         m.restore,
		"reopen":          m.reopen,
		"gc":              m.gc,
		"":                m.check,
	})
	for _, ref := range m.refs {
		m.expectRestores(rt, ref)
	}
}

var names = []string{"a", "b", "c", "d e", "ü", ".hidden", "x.txt"}

// dirs returns the model's directories, "" being the root, sorted.
func (m *treeMachine) dirs() []string {
	out := []string{""}
	for p, n := range m.model {
		if n.Kind == 'd' {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// paths returns the model's paths of the given kinds, sorted.
func (m *treeMachine) paths(kinds string) []string {
	var out []string
	for p, n := range m.model {
		if strings.IndexByte(kinds, n.Kind) >= 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// newPath draws a path that does not exist yet in an existing directory.
func (m *treeMachine) newPath(rt *rapid.T, label string) string {
	dir := rapid.SampledFrom(m.dirs()).Draw(rt, label+"Dir")
	p := path.Join(dir, rapid.SampledFrom(names).Draw(rt, label+"Name"))
	if _, ok := m.model[p]; ok {
		rt.Skip("exists")
	}
	return p
}

func (m *treeMachine) full(p string) string { return filepath.Join(m.w.Dir(), filepath.FromSlash(p)) }

// touched gives a written file a fresh mtime in the incremental set-up.
func (m *treeMachine) touched(rt *rapid.T, p string) {
	if !m.freshMtimes {
		return
	}
	m.tick++
	t := time.Unix(1_600_000_000, m.tick)
	if err := os.Chtimes(m.full(p), t, t); err != nil {
		rt.Fatal(err)
	}
}

func (m *treeMachine) write(rt *rapid.T) {
	var p string
	if files := m.paths("f"); len(files) > 0 && rapid.Bool().Draw(rt, "overwrite") {
		p = rapid.SampledFrom(files).Draw(rt, "file")
	} else {
		p = m.newPath(rt, "new")
	}
	data := rapid.SliceOfN(rapid.Byte(), 0, 48).Draw(rt, "data")
	if err := m.w.WriteFile(p, data); err != nil {
		rt.Fatalf("WriteFile(%q): %v", p, err)
	}
	n, ok := m.model[p]
	if !ok {
		n = node{Kind: 'f', Mode: 0o644 &^ m.umask}
	}
	n.Data = string(data)
	m.model[p] = n
	m.touched(rt, p)
}

func (m *treeMachine) rewriteSameSize(rt *rapid.T) {
	var files []string
	for _, p := range m.paths("f") {
		if m.model[p].Data != "" {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		rt.Skip("no non-empty file")
	}
	p := rapid.SampledFrom(files).Draw(rt, "file")
	old := []byte(m.model[p].Data)
	data := make([]byte, len(old))
	i := rapid.IntRange(0, len(old)-1).Draw(rt, "at")
	copy(data, old)
	data[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, "flip"))
	if err := m.w.WriteFile(p, data); err != nil {
		rt.Fatal(err)
	}
	n := m.model[p]
	n.Data = string(data)
	m.model[p] = n
	m.touched(rt, p)
}

var dirModes = []fs.FileMode{0o755, 0o700, 0o750, 0o775}
var fileModes = []fs.FileMode{0o644, 0o600, 0o755, 0o640, 0o700, 0o664}

func (m *treeMachine) mkdir(rt *rapid.T) {
	p := m.newPath(rt, "dir")
	mode := rapid.SampledFrom(dirModes).Draw(rt, "mode")
	if err := m.w.MkdirAll(p, 0o700); err != nil {
		rt.Fatal(err)
	}
	if err := m.w.Chmod(p, mode); err != nil {
		rt.Fatal(err)
	}
	m.model[p] = node{Kind: 'd', Mode: mode}
}

func (m *treeMachine) symlink(rt *rapid.T) {
	p := m.newPath(rt, "link")
	target := rapid.SampledFrom([]string{"a", "../a", "../../../etc/passwd", "/etc", "nowhere/deep", ".", "d e/ü"}).Draw(rt, "target")
	if err := m.w.Symlink(target, p); err != nil {
		rt.Fatal(err)
	}
	m.model[p] = node{Kind: 'l', Target: target}
}

func (m *treeMachine) remove(rt *rapid.T) {
	all := m.paths("dfl")
	if len(all) == 0 {
		rt.Skip("empty")
	}
	p := rapid.SampledFrom(all).Draw(rt, "path")
	if err := m.w.RemoveAll(p); err != nil {
		rt.Fatal(err)
	}
	for q := range m.model {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m.model, q)
		}
	}
}

func (m *treeMachine) chmod(rt *rapid.T) {
	all := m.paths("df")
	if len(all) == 0 {
		rt.Skip("nothing to chmod")
	}
	p := rapid.SampledFrom(all).Draw(rt, "path")
	n := m.model[p]
	modes := fileModes
	if n.Kind == 'd' {
		modes = dirModes
	}
	n.Mode = rapid.SampledFrom(modes).Draw(rt, "mode")
	if err := m.w.Chmod(p, n.Mode); err != nil {
		rt.Fatal(err)
	}
	m.model[p] = n
}

func (m *treeMachine) rename(rt *rapid.T) {
	all := m.paths("dfl")
	if len(all) == 0 {
		rt.Skip("empty")
	}
	from := rapid.SampledFrom(all).Draw(rt, "from")
	to := m.newPath(rt, "to")
	if to == from || strings.HasPrefix(to, from+"/") {
		rt.Skip("into itself")
	}
	if err := m.w.Rename(from, to); err != nil {
		rt.Fatal(err)
	}
	moved := map[string]node{}
	for q, n := range m.model {
		if q == from || strings.HasPrefix(q, from+"/") {
			moved[to+strings.TrimPrefix(q, from)] = n
			delete(m.model, q)
		}
	}
	maps.Copy(m.model, moved)
}

func (m *treeMachine) checkpoint(rt *rapid.T) {
	ref, err := m.d.Checkpoint(context.Background(), m.w)
	if err != nil {
		rt.Fatal(err)
	}
	if old, ok := m.captured[ref]; ok {
		if diff := cmp.Diff(old, m.model); diff != "" {
			rt.Fatalf("two different trees got ref %s (-first +second):\n%s", ref, diff)
		}
	} else {
		m.refs = append(m.refs, ref)
	}
	m.captured[ref] = maps.Clone(m.model)
}

func (m *treeMachine) restore(rt *rapid.T) {
	if len(m.refs) == 0 {
		rt.Skip("no checkpoint")
	}
	m.expectRestores(rt, rapid.SampledFrom(m.refs).Draw(rt, "ref"))
}

func (m *treeMachine) reopen(rt *rapid.T) {
	_ = m.w.Close()
	w, err := m.d.Open(context.Background(), m.b)
	if err != nil {
		rt.Fatal(err)
	}
	m.w = w
}

func (m *treeMachine) gc(rt *rapid.T) {
	if len(m.refs) > 0 && rapid.Bool().Draw(rt, "deleteOldest") {
		ref := m.refs[0]
		if err := m.d.Delete(ref); err != nil {
			rt.Fatal(err)
		}
		m.refs = m.refs[1:]
		delete(m.captured, ref)
	}
	if _, err := m.d.GC(context.Background()); err != nil {
		rt.Fatal(err)
	}
}

// check: the model tracks the real workspace.
func (m *treeMachine) check(rt *rapid.T) {
	if diff := cmp.Diff(m.model, listTree(rt, m.w.Dir())); diff != "" {
		rt.Fatalf("model and workspace differ (-model +workspace):\n%s", diff)
	}
}

func (m *treeMachine) expectRestores(rt *rapid.T, ref string) {
	ctx := context.Background()
	if err := m.d.Verify(ctx, ref); err != nil {
		rt.Fatalf("Verify(%s): %v", ref, err)
	}
	r, b, err := m.d.Create(ctx, ref)
	if err != nil {
		rt.Fatalf("Create(%s): %v", ref, err)
	}
	defer func() {
		_ = r.Close()
		_ = m.d.RemoveWorkspace(b)
	}()
	if diff := cmp.Diff(m.captured[ref], listTree(rt, r.Dir())); diff != "" {
		rt.Fatalf("Create(%s) differs from the tree at capture (-captured +restored):\n%s", ref, diff)
	}
}
