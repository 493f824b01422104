package sdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// owners returns the Owner of every dispatch.started of id's lineage.
func owners(t *testing.T, k *sdk.Kernel, id eventlog.ID) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, k, id) {
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			out = append(out, ds.Owner)
		}
	}
	return out
}

// A kernel Open makes on a Pebble folder is named LocalOwner of the folder,
// so the process that opens the folder again after a crash is the same
// owner and reopens its own bindings (DESIGN §11); one in memory keeps a
// unique name, and WithOwner still wins.
func TestOpenNamesLocalOwner(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "log")
	run := func(opts ...sdk.Option) (eventlog.ID, []string) {
		k, err := sdk.Open(dir, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		if _, err := sdk.Register(k, "a", func(context.Context, none) (string, error) { return "ok", nil }); err != nil {
			t.Fatal(err)
		}
		id, err := k.Start(ctx, "a", none{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id, owners(t, k, id)
	}
	var want string
	for range 2 { // a second Open of the folder is the same owner
		_, got := run()
		if want == "" {
			// Open gave the new folder its identity (DESIGN §15½.2).
			want = sdk.LocalOwner(dir)
			if !regexp.MustCompile(`:folder-[0-9a-f]{32}$`).MatchString(want) {
				t.Fatalf("LocalOwner(%q) = %q, want the host and the folder's ID", dir, want)
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("dispatch owners %q, want [%q]", got, want)
		}
	}
	if _, got := run(sdk.WithOwner("w1")); len(got) != 1 || got[0] != "w1" {
		t.Fatalf("with WithOwner: dispatch owners %q, want [w1]", got)
	}
	mem, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := sdk.Register(mem, "a", func(context.Context, none) (string, error) { return "ok", nil }); err != nil {
		t.Fatal(err)
	}
	id, err := mem.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, mem, id); len(got) != 1 || got[0] == "" || got[0] == sdk.LocalOwner("") {
		t.Fatalf("in memory: dispatch owners %q, want one unique name", got)
	}
}

// TestOwnerNames: LocalOwner of a folder without an identity (no log, or
// one made before identities and not opened for writing since) is the host
// name, a colon and the folder's absolute path (a relative folder made
// absolute), as every folder was named before; a kernel's default
// owner is the host name, the process ID and eight hex digits. The host
// name is os.Hostname's, "localhost" only when it has none.
func TestOwnerNames(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		"/var/lib/agents": host + ":/var/lib/agents",
		"rel/logs":        host + ":" + filepath.Join(wd, "rel/logs"),
	} {
		if got := sdk.LocalOwner(dir); got != want {
			t.Errorf("LocalOwner(%q) = %q, want %q", dir, got, want)
		}
	}
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(context.Context, none) (string, error) { return "ok", nil })
	})
	id, _ := k.Start(context.Background(), "a", none{})
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	pattern := "^" + regexp.QuoteMeta(fmt.Sprintf("%s/%d/", host, os.Getpid())) + "[0-9a-f]{8}$"
	if got := owners(t, k, id); len(got) != 1 || !regexp.MustCompile(pattern).MatchString(got[0]) {
		t.Fatalf("default owner %q, want one matching %s", got, pattern)
	}
}
