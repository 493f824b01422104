package dirfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// node is one entry of a tree listing: kind 'd', 'f' or 'l'; the permission
// bits of a directory or file; a file's content; a link's target.
type node struct {
	Kind   byte
	Mode   fs.FileMode
	Data   string
	Target string
}

// fataler is what listTree needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// listTree returns every entry below dir, by slash-separated path, without
// following links.
func listTree(t fataler, dir string) map[string]node {
	t.Helper()
	tree := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = node{Kind: 'l', Target: target}
		case info.IsDir():
			tree[rel] = node{Kind: 'd', Mode: info.Mode().Perm()}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = node{Kind: 'f', Mode: info.Mode().Perm(), Data: string(data)}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	return tree
}

// writeTree creates the entries of tree below dir, parents first; directory
// modes are applied last so read-only directories can be filled.
func writeTree(t testing.TB, dir string, tree map[string]node) {
	t.Helper()
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		n := tree[p]
		full := filepath.Join(dir, filepath.FromSlash(p))
		var err error
		switch n.Kind {
		case 'd':
			err = os.MkdirAll(full, 0o700)
		case 'f':
			if err = os.MkdirAll(filepath.Dir(full), 0o700); err == nil {
				if err = os.WriteFile(full, []byte(n.Data), 0o600); err == nil {
					err = os.Chmod(full, n.Mode)
				}
			}
		case 'l':
			if err = os.MkdirAll(filepath.Dir(full), 0o700); err == nil {
				err = os.Symlink(n.Target, full)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if n := tree[paths[i]]; n.Kind == 'd' {
			if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(paths[i])), n.Mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { makeWritable(dir) })
}

// makeWritable gives every directory below dir owner rwx, so t.TempDir's
// cleanup can remove read-only directories when tests do not run as root.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
