package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// recordedResponse is an llm step's recorded result (sdk.Transport's).
type recordedResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// sdescribe is rdescribe with an llm step.succeeded spelled out: its
// body, Truncated and Tokens.
func sdescribe(ev eventlog.Event) string {
	p, ok := ev.Data.(*eventlog.StepSucceeded)
	if !ok {
		return rdescribe(ev)
	}
	var r recordedResponse
	if err := json.Unmarshal(p.Result, &r); err != nil {
		return "succeeded (result does not decode)"
	}
	s := fmt.Sprintf("succeeded %d %q", r.Status, r.Body)
	if p.Truncated {
		s += " truncated"
	}
	if p.Tokens != (eventlog.Tokens{}) {
		s += fmt.Sprintf(" tokens=%d+%d", p.Tokens.Input, p.Tokens.Output)
	}
	return s
}

func swant(t *testing.T, k *sdk.Kernel, id eventlog.ID, want []string) []eventlog.Event {
	t.Helper()
	evs := events(t, k, id)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = sdescribe(ev)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	return evs
}

// send writes s to a streamed response and flushes it.
func send(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

// sseHeader starts a server-sent events response.
func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Model", "m1")
	w.WriteHeader(http.StatusOK)
}

// openStream posts a chat request through rt and returns the response.
func openStream(ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat", strings.NewReader(`{"model":"m1","stream":true}`))
	if err != nil {
		return nil, err
	}
	return (&http.Client{Transport: rt}).Do(req)
}

// readSome reads until it has n bytes.
func readSome(r io.Reader, n int) (string, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return string(b), err
}

// TestStreamReachesCallerAsItArrives: the caller reads a streamed
// response's first event while the server still holds the rest back, and
// nothing but step.started is in the log then; step.succeeded, with the
// whole body and the headers, is appended when the caller reaches EOF. A
// fork replays it — no request — as the same status, headers and bytes.
func TestStreamReachesCallerAsItArrives(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sseHeader(w)
		send(w, "data: one\n\n")
		<-release
		send(w, "data: two\n\n")
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	var k *sdk.Kernel
	var id eventlog.ID
	var midway []string
	k = newKernel(t, newStore(t), func(k2 *sdk.Kernel) {
		_, _ = sdk.Register(k2, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			first, err := readSome(resp.Body, len("data: one\n\n"))
			if err != nil {
				return "", err
			}
			for _, ev := range events(t, k, id) {
				midway = append(midway, sdescribe(ev))
			}
			close(release)
			rest, err := io.ReadAll(resp.Body)
			return fmt.Sprintf("%s %s %s|%s", resp.Status, resp.Header.Get("Content-Type"), first, rest), err
		})
	})
	id, _ = k.Start(ctx, "a", none{})
	res, err := k.Run(ctx, id)
	want := `"200 OK text/event-stream data: one\n\n|data: two\n\n"`
	if err != nil || string(res.Output) != want {
		t.Fatalf("Run = %v, %v; want %s", res, err, want)
	}
	if got := strings.Join(midway, ", "); got != "created a, dispatch 1, started llm m1" {
		t.Fatalf("log while the stream ran: %s", got)
	}
	evs := swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1",
		`succeeded 200 "data: one\n\ndata: two\n\n"`, "completed"})
	var rec recordedResponse
	_ = json.Unmarshal(evs[3].Data.(*eventlog.StepSucceeded).Result, &rec)
	if rec.Header.Get("X-Model") != "m1" || rec.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("recorded headers %v", rec.Header)
	}

	release = make(chan struct{}) // the fork's handler closes it; the server is not asked
	fid, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	midway = nil
	fres, err := k.Run(ctx, fid)
	if err != nil || string(fres.Output) != want || requests.Load() != 1 {
		t.Fatalf("fork = %v, %v after %d requests; want %s from the record", fres, err, requests.Load(), want)
	}
}

// TestStreamClosedEarly: a caller that closes the body after the first
// event records what it read, Truncated, and a replay returns exactly
// that and then EOF.
func TestStreamClosedEarly(t *testing.T) {
	ctx := context.Background()
	srv := stalledStream(t)
	rt := sdk.Transport(nil)
	var closeErr error
	replaying := false
	var replayed string
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			if replaying {
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				replayed = string(b)
				return "", err
			}
			first, err := readSome(resp.Body, 5)
			closeErr = resp.Body.Close()
			if err != nil {
				return "", err
			}
			_, after := resp.Body.Read(make([]byte, 8))
			return fmt.Sprintf("%q after close: %v", first, after != nil), nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	res, err := k.Run(ctx, id)
	if err != nil || closeErr != nil || string(res.Output) != `"\"data:\" after close: true"` {
		t.Fatalf("Run = %v, %v (close: %v)", res, err, closeErr)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", `succeeded 200 "data:" truncated`, "completed"})

	// The fork reads what the caller read, to EOF.
	srv.Close()
	replaying = true
	fid, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil || replayed != "data:" {
		t.Fatalf("fork read %q, %v; want what the caller read", replayed, err)
	}
}

// TestStreamClosedAtItsEnd: a caller that reads every byte of a stream
// that has ended and closes it before the read that would return io.EOF
// (an SSE client stops at its terminating event) recorded the whole
// reply: step.succeeded not Truncated. A stream closed while more bytes
// are still to come stays Truncated (TestStreamClosedEarly).
func TestStreamClosedAtItsEnd(t *testing.T) {
	ctx := context.Background()
	const body = "data: one\n\ndata: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		send(w, body)
		// The stream's end reaches the client after its bytes, so the
		// caller's read of them does not also see io.EOF.
		time.Sleep(10 * time.Millisecond)
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			b := make([]byte, len(body))
			_, err = io.ReadFull(resp.Body, b)
			if cerr := resp.Body.Close(); err == nil {
				err = cerr
			}
			return string(b), err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if res, err := k.Run(ctx, id); err != nil {
		t.Fatalf("Run = %v, %v", res, err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", fmt.Sprintf("succeeded 200 %q", body), "completed"})
}

// TestStreamOpenAtHandlerReturn: a handler that returns with a stream
// still open records what it read, Truncated, before its own end
// (DESIGN §21½.8).
func TestStreamOpenAtHandlerReturn(t *testing.T) {
	srv := stalledStream(t)
	rt := sdk.Transport(nil)
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			return readSome(resp.Body, 4) // and never closes it
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", `succeeded 200 "data" truncated`, "completed"})
}

// TestStreamBreaksAfterFirstByte: a stream the server cuts after its
// first event is final — recorded step.failed (no RetryAt) though the
// policy allows three attempts, one request made — and the caller's read
// returns the *StepError a replay returns.
func TestStreamBreaksAfterFirstByte(t *testing.T) {
	ctx := context.Background()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sseHeader(w)
		send(w, "data: one\n\n")
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 3}))
	var readErrs []string
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				var se *sdk.StepError
				if !errors.As(err, &se) {
					return "", err
				}
				readErrs = append(readErrs, "replay: "+se.Error())
				return "", nil
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			var se *sdk.StepError
			if !errors.As(err, &se) {
				return "", fmt.Errorf("read %q, %v; want a *StepError", b, err)
			}
			readErrs = append(readErrs, "live: "+err.Error())
			return string(b), nil
		})
	}, sdk.WithClock(instantClock{newFakeClock()}))
	id, _ := k.Start(ctx, "a", none{})
	if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `"data: one\n\n"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	evs := events(t, k, id)
	if len(evs) != 5 || sdescribe(evs[2]) != "started llm m1" || sdescribe(evs[4]) != "completed" || requests.Load() != 1 {
		t.Fatalf("events %q after %d requests", describeAllR(evs), requests.Load())
	}
	failed, ok := evs[3].Data.(*eventlog.StepFailed)
	if !ok || !failed.RetryAt.IsZero() || !strings.HasPrefix(failed.Error, "stream broke after 11 bytes: ") {
		t.Fatalf("event 4 = %s, want a final step.failed", sdescribe(evs[3]))
	}
	fid, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	want := []string{"live: m1: " + failed.Error, "replay: m1: " + failed.Error}
	if strings.Join(readErrs, "\n") != strings.Join(want, "\n") || requests.Load() != 1 {
		t.Fatalf("errors %q, want %q", readErrs, want)
	}
}

// TestStreamBreaksBeforeFirstByte: a stream cut after its headers but
// before any byte of its body is a failed attempt, retried: the second
// attempt's stream is the step's result.
func TestStreamBreaksBeforeFirstByte(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		w.(http.Flusher).Flush()
		if requests.Add(1) == 1 {
			panic(http.ErrAbortHandler)
		}
		send(w, "data: one\n\n")
		send(w, "data: two\n\n")
	}))
	defer srv.Close()
	rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 3}))
	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		})
	}, sdk.WithClock(instantClock{newFakeClock()}))
	if err != nil || string(res.Output) != `"data: one\n\ndata: two\n\n"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1",
		"retrying read response body: unexpected EOF", "started llm m1 attempt=2",
		`succeeded 200 "data: one\n\ndata: two\n\n"`, "completed"})
}

// TestStreamCancelled: a stream whose request context ends while the
// caller reads is step.cancelled (DESIGN §21½.8), and the caller's read
// says it was cancelled.
func TestStreamCancelled(t *testing.T) {
	srv := stalledStream(t)
	rt := sdk.Transport(nil)
	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			resp, err := openStream(rctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if _, err := readSome(resp.Body, 4); err != nil {
				return "", err
			}
			cancel()
			_, err = io.ReadAll(resp.Body)
			return fmt.Sprintf("canceled=%v", errors.Is(err, context.Canceled)), nil
		})
	})
	if err != nil || string(res.Output) != `"canceled=true"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", "cancelled", "completed"})
}

// TestStreamTooLarge: a stream whose record would pass MaxValueSize fails
// its step with an error that says so — not recorded cut short — and the
// caller's read gets that error.
func TestStreamTooLarge(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		for range 200 { // 12.5 MiB: as base64, past 16 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	var readErr error
	var read int
	k, id, _, _ := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			var b []byte
			b, readErr = io.ReadAll(resp.Body)
			read = len(b)
			return "", nil
		})
	})
	var se *sdk.StepError
	if !errors.As(readErr, &se) || !strings.Contains(se.Message, "MaxValueSize") {
		t.Fatalf("read error %v, want the step's error naming MaxValueSize", readErr)
	}
	if read > sdk.MaxValueSize*3/4 {
		t.Fatalf("the caller read %d bytes, more than can be recorded", read)
	}
	evs := swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", "failed " + se.Message, "completed"})
	if msg := evs[3].Data.(*eventlog.StepFailed).Error; !strings.HasPrefix(msg, "streamed response passed the 16777216-byte limit of a recorded value (MaxValueSize) after ") {
		t.Fatalf("error %q", msg)
	}
}

// TestStreamBinary: a stream that is not UTF-8 is recorded raw and
// replayed byte for byte.
func TestStreamBinary(t *testing.T) {
	ctx := context.Background()
	raw := []byte{0xff, 0xfe, 0x00, 'a', 0xc3, 0x28, 0x80}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		send(w, string(raw[:3]))
		send(w, string(raw[3:]))
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	var got [][]byte
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			got = append(got, b)
			return "", err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", fmt.Sprintf("succeeded 200 %q", raw), "completed"})
	fid, _ := k.Fork(ctx, id, 4)
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0], raw) || !bytes.Equal(got[1], raw) {
		t.Fatalf("read %q live and on replay, want %q", got, raw)
	}
}

// TestWatchDeltas: WatchDeltas yields the pieces of a streaming reply
// while the handler reads them, in order, and ends with the execution;
// together they are the recorded body.
func TestWatchDeltas(t *testing.T) {
	ctx := context.Background()
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		for _, s := range []string{"data: a\n\n", "data: b\n\n", "data: c\n\n"} {
			send(w, s)
			<-next
		}
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	var got []string
	watched := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		for dl, err := range k.WatchDeltas(wctx, id) {
			if err != nil {
				watched <- err
				return
			}
			got = append(got, fmt.Sprintf("%d %s", dl.Index, dl.Data))
			next <- struct{}{} // the server sends the next piece once this one was seen
		}
		watched <- nil
	}()
	for sdk.DeltaWatchers(k, id) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	want := []string{"0 data: a\n\n", "1 data: b\n\n", "2 data: c\n\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("deltas %q, want %q", got, want)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", `succeeded 200 "data: a\n\ndata: b\n\ndata: c\n\n"`, "completed"})
}

// TestStreamOpenWhenParked: a handler that parks (a long Sleep) with a
// stream open records what it read, Truncated, before dispatch.parked;
// the next dispatch replays exactly that.
func TestStreamOpenWhenParked(t *testing.T) {
	ctx := context.Background()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sseHeader(w)
		send(w, "data: one\n\n")
		<-r.Context().Done()
	}))
	defer srv.Close()
	rt := sdk.Transport(nil)
	clock := newFakeClock()
	var reads []string
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			b, err := readSome(resp.Body, 4)
			reads = append(reads, b)
			if err != nil {
				return "", err
			}
			return b, sdk.Sleep(ctx, time.Hour)
		})
	}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	clock.Advance(time.Hour)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", "timer.started",
		`succeeded 200 "data" truncated`, "parked timer", "dispatch 2", "timer.fired", "completed"})
	if strings.Join(reads, ",") != "data,data" || requests.Load() != 1 {
		t.Fatalf("reads %q after %d requests", reads, requests.Load())
	}
}

// TestStreamShutdown: when the context given to Run ends while a reply
// streams (a shutdown, DESIGN §15½.1), the step is step.cancelled and
// nothing else is recorded: the execution stays resumable.
func TestStreamShutdown(t *testing.T) {
	srv := stalledStream(t)
	rt := sdk.Transport(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readErr error
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if _, err := readSome(resp.Body, 4); err != nil {
				return "", err
			}
			cancel()
			_, readErr = io.ReadAll(resp.Body)
			return "a fallback answer", nil
		})
	})
	id, _ := k.Start(context.Background(), "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the caller's cancellation", err)
	}
	if !errors.Is(readErr, context.Canceled) {
		t.Fatalf("the read returned %v, want the cancellation", readErr)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", "cancelled"})
}

// TestStreamClosedWhileReading: a Close from another goroutine while a
// Read waits for the model ends that Read, and the step records what the
// caller had read, Truncated, once.
func TestStreamClosedWhileReading(t *testing.T) {
	srv := stalledStream(t)
	rt := sdk.Transport(nil)
	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, srv.URL)
			if err != nil {
				return "", err
			}
			first, err := readSome(resp.Body, len("data: one\n\n"))
			if err != nil {
				return "", err
			}
			read := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 16)) // waits: the server sends no more
				read <- err
			}()
			time.Sleep(20 * time.Millisecond)
			if err := resp.Body.Close(); err != nil {
				return "", err
			}
			err = <-read
			return fmt.Sprintf("%q then %v", first, err), nil
		})
	})
	if err != nil || !strings.Contains(string(res.Output), "read on a closed model response") {
		t.Fatalf("Run = %v, %v", res, err)
	}
	swant(t, k, id, []string{"created a", "dispatch 1", "started llm m1", `succeeded 200 "data: one\n\n" truncated`, "completed"})
}

// stalledStream is a model server that sends one event, "data: one", and
// then holds the stream open until the client hangs up.
func stalledStream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		send(w, "data: one\n\n")
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}
