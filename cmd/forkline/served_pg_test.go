package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
)

// pgWriter is the worker of TestReadPostgresWhileWriting, run as another
// process (FORKLINE_TEST_PGWRITE=url, see TestMain): it creates an
// execution, says "created ID", then appends one event per line it reads
// on stdin, saying "head N" after each, until stdin closes.
func pgWriter(url string) int {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, url)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer s.Close()
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "writer", Input: []byte(`{}`)}, time.Now())
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("created", id)
	head := uint64(1)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		ev := eventlog.Event{Time: time.Now(), Data: &eventlog.MarkerRecorded{Name: fmt.Sprint("m", head)}}
		if head, err = s.Append(ctx, id, head, ev); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("head", head)
	}
	return 0
}

// TestReadPostgresWhileWriting: on Postgres the commands read the log
// directly while another process writes it (DESIGN §11): after each event
// the writer appends, ls and events (another process, this one) see
// exactly the events appended so far.
func TestReadPostgresWhileWriting(t *testing.T) {
	url := pgtest.SchemaURL(t)
	w := exec.Command(os.Args[0], "-test.run=^$")
	w.Env = append(os.Environ(), "FORKLINE_TEST_PGWRITE="+url)
	stdin, err := w.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = w.Wait()
	}()
	lines := bufio.NewReader(out)
	say := func() string {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil || strings.HasPrefix(line, "error:") {
			t.Fatalf("writer: %q, %v", line, err)
		}
		return strings.TrimSpace(line)
	}
	id, ok := strings.CutPrefix(say(), "created ")
	if !ok {
		t.Fatalf("writer did not create an execution")
	}
	db := []string{"--dir", t.TempDir(), "--db", url, "--json"}
	for want := uint64(1); want <= 4; want++ {
		if want > 1 {
			if _, err := io.WriteString(stdin, "append\n"); err != nil {
				t.Fatal(err)
			}
			if got := say(); got != fmt.Sprint("head ", want) {
				t.Fatalf("writer says %q, want head %d", got, want)
			}
		}
		listed := lsJSON(t, db[:4]...)
		if len(listed) != 1 || listed[0].ID != id || listed[0].Head != want || listed[0].Status != "pending" {
			t.Fatalf("ls while the writer is at head %d: %+v", want, listed)
		}
		stdout, stderr, code := runCLI(t, append(db, "events", id)...)
		if code != exitOK {
			t.Fatalf("events: exit %d: %s", code, stderr)
		}
		var evs struct{ Events []struct{ Kind string } }
		if err := json.Unmarshal([]byte(stdout), &evs); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, ev := range evs.Events {
			kinds = append(kinds, ev.Kind)
		}
		wantKinds := append([]string{"execution.created"}, strings.Split(strings.Repeat("marker.recorded,", int(want-1)), ",")[:want-1]...)
		if strings.Join(kinds, " ") != strings.Join(wantKinds, " ") {
			t.Fatalf("events at head %d: %v, want %v", want, kinds, wantKinds)
		}
	}
}
