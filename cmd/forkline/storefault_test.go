package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// readCommands are the commands that open the log read-only.
func readCommands(f *fixture, page string) [][]string {
	a := f.ids["A"].String()
	return [][]string{{"ls"}, {"tree"}, {"events", a}, {"coverage", a}, {"coverage", a, "13"}, {"show", a, "7"}, {"timeline", a, "--html", page}}
}

// logBytes is the name and content of every file of the log folder of the
// data folder dir.
func logBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(logDir(dir), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// The inspection commands open the log read-only: not one file of the log
// folder is created, changed or deleted (before, each opened it for
// writing, and Pebble wrote a new write-ahead log, OPTIONS and MANIFEST).
func TestReadCommandsWriteNothing(t *testing.T) {
	f := newFixture(t)
	page := filepath.Join(t.TempDir(), "t.html")
	before := logBytes(t, f.dir)
	for _, cmd := range readCommands(f, page) {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, cmd...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
		if d := changed(before, logBytes(t, f.dir)); d != nil {
			t.Fatalf("%v changed the log folder: %v", cmd, d)
		}
	}
}

// changed lists the files created, deleted or changed from before to after.
func changed(before, after map[string]string) []string {
	var out []string
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			out = append(out, name+" deleted")
		case a != b:
			out = append(out, name+" changed")
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, name+" created")
		}
	}
	return out
}

// On a read-only mount the inspection commands work, and a command that
// writes says why it cannot. It needs root (a read-only bind mount: root
// ignores permission bits, so chmod would not do).
func TestReadOnlyMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a read-only bind mount")
	}
	f := newFixture(t)
	ld := logDir(f.dir)
	if out, err := exec.Command("mount", "--bind", ld, ld).CombinedOutput(); err != nil {
		t.Skipf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", ld).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", ld).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ld, "probe"), nil, 0o644); err == nil {
		t.Fatal("the mount is writable")
	}
	page := filepath.Join(t.TempDir(), "t.html")
	for _, cmd := range readCommands(f, page) {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, cmd...)...)
		if code != exitOK || stdout == "" {
			t.Errorf("%v on a read-only mount: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
	}
	_, stderr, code := runCLI(t, "--dir", f.dir, "fork", f.ids["A"].String(), "3")
	if code == exitOK || !strings.Contains(stderr, "read-only file system") || strings.Contains(stderr, "in use") {
		t.Errorf("fork on a read-only mount: exit %d, stderr %q; want a failure saying the file system is read-only", code, stderr)
	}
}

// A log folder the user may not read is reported as permission denied,
// not as a log in use by another process. Root reads anything: as root the
// test runs itself again as the user nobody (uid 65534).
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		runAsNobody(t, "TestPermissionDenied")
		return
	}
	f := newFixture(t)
	if err := os.Chmod(logDir(f.dir), 0o500); err != nil { // no writes: Pebble's LOCK cannot be created
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(logDir(f.dir), 0o755) })
	_, stderr, code := runCLI(t, "--dir", f.dir, "fork", f.ids["A"].String(), "3")
	if code == exitOK || !strings.Contains(stderr, "permission denied") || strings.Contains(stderr, "in use") {
		t.Errorf("fork in a folder without write permission: exit %d, stderr %q; want permission denied", code, stderr)
	}
	if err := os.Chmod(logDir(f.dir), 0); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "--dir", f.dir, "ls")
	if code == exitOK || !strings.Contains(stderr, "permission denied") || strings.Contains(stderr, "in use") {
		t.Errorf("ls of a folder without read permission: exit %d, stderr %q; want permission denied", code, stderr)
	}
}

// timeline --html refuses a target that is not a regular file (before, it
// renamed its page over it: a symlink, a pipe, or as root /dev/full), with
// exit 2 and the target left as it was.
func TestTimelineTarget(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "real.html")
	if err := os.WriteFile(real, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.html")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{link, fifo, dir} {
		stdout, stderr, code := runCLI(t, "--dir", f.dir, "timeline", f.ids["A"].String(), "--html", target)
		if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("timeline --html %s: exit %d, stdout %q, stderr %q; want exit 2 and one line", target, code, stdout, stderr)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced (%v)", err)
	}
	if b, err := os.ReadFile(real); err != nil || !bytes.Equal(b, []byte("mine")) {
		t.Errorf("the symlink's target changed: %q, %v", b, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced (%v)", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("the folder holds %d entries, want the 3 it had (no leftover temporary file)", len(entries))
	}
	// A regular file is replaced, a new one created.
	for _, target := range []string{real, filepath.Join(dir, "new.html")} {
		if _, stderr, code := runCLI(t, "--dir", f.dir, "timeline", f.ids["A"].String(), "--html", target); code != exitOK {
			t.Errorf("timeline --html %s: exit %d, %s", target, code, stderr)
		}
		if b, err := os.ReadFile(target); err != nil || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) {
			t.Errorf("%s: not the page: %.40q, %v", target, b, err)
		}
	}
}

// runAsNobody runs the test named test in a copy of this test binary as the
// user nobody, with a temporary folder that user may write, and fails t if
// it does not pass there (a skip there is a failure).
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "forkline-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "forkline.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir, "GOCACHE="+filepath.Join(dir, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as the user nobody: %v\n%s", test, err, out)
	}
}
