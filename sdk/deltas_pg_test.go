package sdk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestWatchDeltasAcrossProcesses (DESIGN §21½.4): two kernels on one
// Postgres schema, each with its own store (two processes). Kernel A's
// handler reads a reply a slow fake server streams; kernel B's WatchDeltas
// yields, through NOTIFY, exactly the deltas A's own watcher saw that are
// at most 8 KB — same StepID, Index and Data, in order — and none over
// 8 KB (not carried), then ends with the execution. Together A's deltas
// are the body recorded in step.succeeded.
func TestWatchDeltasAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	huge := strings.Repeat("y", 3*eventlog.MaxCarriedDelta)
	pieces := []string{"data: a\n\n", "data: " + strings.Repeat("x", 5000) + "\n\n", "data: b\n\n", "data: " + huge + "\n\n", "data: c\n\n", "data: [DONE]\n\n"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		for _, p := range pieces {
			send(w, p)
			time.Sleep(40 * time.Millisecond)
		}
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	ka := newKernel(t, stores[0], func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			buf := make([]byte, 64<<10)
			n := 0
			for {
				m, err := resp.Body.Read(buf)
				n += m
				if errors.Is(err, io.EOF) {
					return n, nil
				}
				if err != nil {
					return n, err
				}
			}
		})
	})
	kb := newKernel(t, stores[1], func(k *sdk.Kernel) {})
	id, err := ka.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	watch := func(k *sdk.Kernel, out *[]sdk.Delta, done chan<- error) {
		for dl, err := range k.WatchDeltas(wctx, id) {
			if err != nil {
				done <- err
				return
			}
			*out = append(*out, dl)
		}
		done <- nil
	}
	var local, remote []sdk.Delta
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); watch(ka, &local, errs) }()
	go func() { defer wg.Done(); watch(kb, &remote, errs) }()
	for sdk.DeltaWatchers(ka, id) == 0 || sdk.DeltaWatchers(kb, id) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := ka.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	evs := events(t, ka, id)
	var body []byte
	for _, ev := range evs {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			var r recordedResponse
			if err := decodeJSON(p.Result, &r); err != nil {
				t.Fatal(err)
			}
			body = r.Body
		}
	}
	var whole []byte
	var carried []sdk.Delta
	over := 0
	for i, dl := range local {
		if dl.Index != i {
			t.Fatalf("local delta %d has Index %d", i, dl.Index)
		}
		whole = append(whole, dl.Data...)
		if len(dl.Data) <= eventlog.MaxCarriedDelta {
			carried = append(carried, dl)
		} else {
			over++
		}
	}
	if !bytes.Equal(whole, body) || !bytes.Equal(body, []byte(strings.Join(pieces, ""))) {
		t.Fatalf("local deltas make %d bytes, recorded body %d, sent %d", len(whole), len(body), len(strings.Join(pieces, "")))
	}
	if len(carried) < 3 {
		t.Fatalf("only %d local deltas of at most 8 KB", len(carried))
	}
	if got, want := describeDeltas(remote), describeDeltas(carried); got != want {
		t.Fatalf("deltas in the other process:\n%s\nwant (this process's of at most 8 KB):\n%s", got, want)
	}
	t.Logf("%d deltas, %d over 8 KB not carried", len(local), over)
}

// describeDeltas spells deltas out for a comparison: step, index, length
// and the first and last bytes.
func describeDeltas(ds []sdk.Delta) string {
	var b strings.Builder
	for _, d := range ds {
		h := d.Data
		if len(h) > 12 {
			h = append(append([]byte{}, h[:6]...), h[len(h)-6:]...)
		}
		fmt.Fprintf(&b, "%s #%d %d %q %.8x\n", d.StepID, d.Index, len(d.Data), h, sha256.Sum256(d.Data))
	}
	return b.String()
}
