package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// TestVersionsCLI (DESIGN §19): forkline ls --version lists only the
// executions of that code version, --json ls and show name it; fork
// --version V records V in the fork's fork.created (the store keeps it as
// Info.Version), a fork without it keeps its parent's, and a version with
// a NUL byte is refused with exit 2 and nothing written.
func TestVersionsCLI(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	start := func(version string) eventlog.ID {
		t.Helper()
		var opts []sdk.Option
		if version != "" {
			opts = append(opts, sdk.WithVersion(version))
		}
		k, err := sdk.New(s, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sdk.Register(k, "v", func(ctx context.Context, n int) (int, error) {
			return sdk.Step(ctx, "double", func(context.Context) (int, error) { return 2 * n, nil })
		}); err != nil {
			t.Fatal(err)
		}
		id, err := k.Start(t.Context(), "v", 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	v1, none := start("v1"), start("")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	out := cli("ls", "--version", "v1")
	if !strings.Contains(out, v1.String()) || strings.Contains(out, none.String()) {
		t.Fatalf("ls --version v1 lists:\n%s\nwant %s and not %s", out, v1, none)
	}
	if out := cli("ls", "--version", "v9"); !strings.Contains(out, "match") || strings.Contains(out, v1.String()) {
		t.Fatalf("ls --version v9 lists:\n%s\nwant none", out)
	}
	var listed struct {
		Executions []struct{ ID, Version string }
	}
	if err := json.Unmarshal([]byte(cli("--json", "ls")), &listed); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, e := range listed.Executions {
		versions[e.ID] = e.Version
	}
	if versions[v1.String()] != "v1" || versions[none.String()] != "" || len(versions) != 2 {
		t.Fatalf("--json ls versions %v, want %s: v1, %s: none", versions, v1, none)
	}
	if out := cli("show", v1.String(), "1"); !strings.Contains(out, "version    v1") {
		t.Fatalf("show of a v1 execution:\n%s\nwant its version", out)
	}

	forked := func(args ...string) (eventlog.ID, *eventlog.ForkCreated, eventlog.Info) {
		t.Helper()
		var f struct{ ID string }
		if err := json.Unmarshal([]byte(cli(append([]string{"--json", "fork"}, args...)...)), &f); err != nil {
			t.Fatal(err)
		}
		id, err := eventlog.ParseID(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		info, err := s.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		var fc *eventlog.ForkCreated
		for ev, err := range s.Events(t.Context(), id, info.ForkSeq+1) {
			if err != nil {
				t.Fatal(err)
			}
			fc, _ = ev.Data.(*eventlog.ForkCreated)
			break
		}
		if fc == nil {
			t.Fatalf("fork %s: its first own event is not fork.created", id)
		}
		return id, fc, info
	}
	moved, fc, info := forked(v1.String(), "1", "--version", "v2")
	if fc.Version != "v2" || info.Version != "v2" {
		t.Fatalf("fork --version v2: fork.created Version %q, Info.Version %q; want v2", fc.Version, info.Version)
	}
	kept, fc, info := forked(v1.String(), "1")
	if fc.Version != "v1" || info.Version != "v1" {
		t.Fatalf("fork without --version: fork.created Version %q, Info.Version %q; want the parent's v1", fc.Version, info.Version)
	}
	if out := cli("ls", "--version", "v2"); !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 2 || !strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], moved.String()) {
		t.Fatalf("ls --version v2 lists:\n%s\nwant only %s", out, moved)
	}
	if out := cli("ls", "--version", "v1"); !strings.Contains(out, kept.String()) || strings.Contains(out, moved.String()) {
		t.Fatalf("ls --version v1 lists:\n%s\nwant the kept fork %s, not %s", out, kept, moved)
	}

	before := fingerprint(t, dir)
	_, stderr, code := runCLI(t, "--dir", dir, "fork", v1.String(), "1", "--version", "bad\x00")
	if code != 2 || !strings.Contains(stderr, "NUL") {
		t.Fatalf("fork --version with a NUL byte: exit %d, %s; want exit 2 naming the NUL byte", code, stderr)
	}
	if after := fingerprint(t, dir); after != before {
		t.Fatal("a refused fork --version wrote to the log")
	}
}
