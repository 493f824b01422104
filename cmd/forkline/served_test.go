package main

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/forkline/forkline/internal/serveapi"
)

// served is a `forkline serve` running as another process: the test
// binary acting as the command (FORKLINE_TEST_MAIN, see TestMain).
type served struct {
	cmd   *exec.Cmd
	url   string // http://127.0.0.1:PORT/
	login string // the sign-in link it printed: URL + "login?token=…"
	token string
	// workers is the line that says what its workers run (the third).
	workers string
}

// startServe starts `forkline --dir dir serve` in another process and
// waits until it serves.
func startServe(t *testing.T, dir string, flags ...string) *served {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--dir", dir, "serve", "--addr", "127.0.0.1:0"}, flags...)...)
	cmd.Env = append(os.Environ(), "FORKLINE_TEST_MAIN=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	_, rest, ok := strings.Cut(line, " on ")
	if err != nil || !ok {
		t.Fatalf("serve said %q (%v), stderr %q", line, err, errb.String())
	}
	s.url, _, _ = strings.Cut(rest, " ")
	line, err = br.ReadString('\n')
	if link, ok := strings.CutPrefix(strings.TrimSpace(line), "sign in: "); ok && err == nil {
		s.login = link
		_, s.token, _ = strings.Cut(link, "?token=")
	}
	if s.workers, err = br.ReadString('\n'); err != nil {
		t.Fatalf("serve said no third line (%v), stderr %q", err, errb.String())
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	return s
}

// stop interrupts the server as a user would and waits for it to exit 0.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// servedReads are the read commands compared through serve and directly.
func servedReads(f *fixture, page string) [][]string {
	a, d := f.ids["A"].String(), f.ids["D"].String()
	cmds := [][]string{
		{"ls"}, {"ls", "--status", "completed,failed"}, {"ls", "--agent", "mailer"}, {"tree"},
		{"events", a}, {"events", d}, {"coverage", a}, {"coverage", a, "13"}, {"coverage", a, "20"},
		{"show", a, "7"}, {"show", a, "26"}, {"du"}, {"gc", "--older-than", "0s", "--dry-run"},
		{"timeline", a, "--html", page},
		// Errors come out the same too.
		{"show", a, "99"}, {"events", "ffffffff"}, {"coverage", a[:1]},
	}
	for _, c := range cmds[:len(cmds)-4] {
		cmds = append(cmds, append([]string{"--json"}, c...))
	}
	return cmds
}

// outcome is what one command printed and returned.
type outcome struct {
	stdout, stderr string
	code           int
	page           string // the timeline's file, for timeline
}

func runAll(t *testing.T, f *fixture, cmds [][]string, page string) []outcome {
	t.Helper()
	var out []outcome
	for _, c := range cmds {
		_ = os.Remove(page)
		stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, c...)...)
		o := outcome{stdout: stdout, stderr: stderr, code: code}
		if c[0] == "timeline" {
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatalf("%v: exit %d: %s: %v", c, code, stderr, err)
			}
			o.page = string(b)
		}
		out = append(out, o)
	}
	return out
}

func compareOutcomes(t *testing.T, cmds [][]string, direct, remote []outcome) {
	t.Helper()
	for i, c := range cmds {
		if direct[i] != remote[i] {
			t.Errorf("%v through serve differs from the direct read:\ndirect: exit %d\n%s%s\nserved: exit %d\n%s%s",
				c, direct[i].code, direct[i].stdout, direct[i].stderr, remote[i].code, remote[i].stdout, remote[i].stderr)
		}
	}
}

// TestReadThroughServe: while `forkline serve` holds a Pebble log (which
// locks it), the read commands of another process read through its API
// and print exactly what they print reading the log directly — tables,
// JSON, the timeline file and errors alike; a fork the serving process
// appends meanwhile is seen; a write command fails naming the server and
// writes nothing; the advert goes when the server stops (DESIGN §11).
func TestReadThroughServe(t *testing.T) {
	f := newFixture(t)
	page := filepath.Join(t.TempDir(), "t.html")
	cmds := servedReads(f, page)
	direct := runAll(t, f, cmds, page)
	for i, c := range cmds {
		if wantErr := i >= 14 && i < 17; (direct[i].code != exitOK) != wantErr {
			t.Fatalf("%v directly: exit %d: %s", c, direct[i].code, direct[i].stderr)
		}
	}

	// No worker: the fixture's pending forks stay as they are.
	s := startServe(t, f.dir, "--workers", "0")
	a, ok, err := serveapi.ReadAdvert(f.dir)
	if err != nil || !ok || a.URL != s.url || a.PID != s.cmd.Process.Pid {
		t.Fatalf("advert %+v, %v, %v; serve says %s (pid %d)", a, ok, err, s.url, s.cmd.Process.Pid)
	}
	remote := runAll(t, f, cmds, page)
	compareOutcomes(t, cmds, direct, remote)

	// A write command names the server and writes nothing.
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "fork", f.ids["A"].String(), "3")
	if code != exitInput || stdout != "" || !strings.Contains(stderr, "forkline serve (pid ") || !strings.Contains(stderr, s.url) {
		t.Fatalf("fork while served: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// The serving process writes (a fork from its page); the next read
	// sees it.
	if !strings.HasPrefix(s.login, s.url+"login?token=") || s.token != a.Token || len(a.Token) != 32 {
		t.Fatalf("serve printed the sign-in link %q; advert %+v", s.login, a)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest("POST", s.url+"e/"+f.ids["A"].String()+"/fork", strings.NewReader(url.Values{"at": {"13"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST fork: %s", resp.Status)
	}
	after := runAll(t, f, cmds[:4], page)
	if strings.Count(after[0].stdout, "\n") != strings.Count(direct[0].stdout, "\n")+1 {
		t.Fatalf("ls after a fork by the server:\n%s\nbefore:\n%s", after[0].stdout, direct[0].stdout)
	}

	s.stop(t)
	if _, ok, err := serveapi.ReadAdvert(f.dir); ok || err != nil {
		t.Fatalf("the advert outlived serve (%v)", err)
	}
	compareOutcomes(t, cmds[:4], runAll(t, f, cmds[:4], page), after)
}

// TestServeAdvertStale: an advert left by a server that crashed breaks
// nothing: with the log free the commands read it directly; with the log
// held by some process that does not serve, they say the advertised
// server does not answer; with no advert, they say none is advertised and
// point at forkline serve. Either way, exit 2, one line, nothing written.
func TestServeAdvertStale(t *testing.T) {
	f := newFixture(t)
	want, _, _ := runCLI(t, "--dir", f.dir, "ls")
	s := startServe(t, f.dir, "--workers", "0")
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	if _, ok, _ := serveapi.ReadAdvert(f.dir); !ok {
		t.Fatal("a killed server left no advert: the test tests nothing")
	}
	if got, stderr, code := runCLI(t, "--dir", f.dir, "ls"); code != exitOK || got != want {
		t.Fatalf("ls with a stale advert: exit %d %s\n%s\nwant\n%s", code, stderr, got, want)
	}

	hold := func(t *testing.T) func() {
		holder := exec.Command(os.Args[0], "-test.run=^$")
		holder.Env = append(os.Environ(), "FORKLINE_TEST_HOLD="+logDir(f.dir))
		stdin, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("holder: %q, %v", line, err)
		}
		return func() {
			_ = stdin.Close()
			_ = holder.Wait()
		}
	}
	release := hold(t)
	defer release()
	for _, c := range []struct {
		name string
		want []string
	}{
		{"stale", []string{"in use by another process", "does not answer", "pid "}},
		{"none", []string{"in use by another process", "no forkline serve advertises it", "forkline serve --dir"}},
	} {
		if c.name == "none" {
			if err := os.Remove(filepath.Join(f.dir, serveapi.AdvertFile)); err != nil {
				t.Fatal(err)
			}
		}
		for _, cmd := range [][]string{{"ls"}, {"events", f.ids["A"].String()}} {
			stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, cmd...)...)
			ok := code == exitInput && stdout == "" && strings.Count(stderr, "\n") == 1
			for _, w := range c.want {
				ok = ok && strings.Contains(stderr, w)
			}
			if !ok {
				t.Errorf("%s advert, %v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, cmd, code, stdout, stderr, c.want)
			}
		}
	}
}
