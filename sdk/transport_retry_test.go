package sdk_test

import (
	"bytes"
	"context"
	"errors"
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

// flakyModel answers its first fails requests with status (and a
// Retry-After of 7 s), then 200 with a reply.
func flakyModel(t *testing.T, fails int64, status int) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) <= fails {
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"error":"slow down"}`, status)
			return
		}
		_, _ = io.WriteString(w, `{"reply":"hello"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// askModel posts one chat request through rt and returns the status and
// body the client sees.
func askModel(ctx context.Context, rt http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat", bytes.NewReader([]byte(`{"model":"m1","messages":["hi"]}`)))
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.Status + " " + string(bytes.TrimSpace(b)), err
}

// TestTransportRetries429: a model that answers 429 (Retry-After: 7) twice
// and then 200 is recorded as two retried attempts and one result, the
// 200; each backoff honours Retry-After (at least 7 s where the policy
// alone would wait about 100 ms), waited on the clock; a replay (a fork
// at the result) makes no request and does not wait.
func TestTransportRetries429(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	srv, requests := flakyModel(t, 2, http.StatusTooManyRequests)
	rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 4, Initial: 100 * time.Millisecond}))
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return askModel(ctx, rt, srv.URL)
		})
	}, sdk.WithClock(clock))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	for range 2 {
		left := clock.waitWaiter(t)
		if left != 7*time.Second {
			t.Errorf("backoff %v, want Retry-After's 7 s", left)
		}
		clock.Advance(left)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1",
		"started llm m1", "retrying HTTP 429 Too Many Requests",
		"started llm m1 attempt=2", "retrying HTTP 429 Too Many Requests",
		"started llm m1 attempt=3", "succeeded", "completed"})
	if requests.Load() != 3 {
		t.Fatalf("%d requests, want 3", requests.Load())
	}
	var out string
	if err := decodeJSON(evs[len(evs)-1].Data.(*eventlog.ExecutionCompleted).Output, &out); err != nil || out != `200 OK {"reply":"hello"}` {
		t.Fatalf("output %q, %v", out, err)
	}
	afters := clock.Afters()
	fid, err := k.Fork(ctx, id, 8)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil || string(res.Output) != `"200 OK {\"reply\":\"hello\"}"` {
		t.Fatalf("fork = %v, %v", res, err)
	}
	if requests.Load() != 3 || clock.Afters() != afters {
		t.Fatalf("replay made %d requests and waited %d times; want none", requests.Load()-3, clock.Afters()-afters)
	}
}

// TestTransportFinalResponse: when no retry is left (or no policy
// exists) a 5xx is the step's result — recorded as succeeded with its
// status, which the client sees — and a connection error that is not
// retried is the step's error.
func TestTransportFinalResponse(t *testing.T) {
	srv, requests := flakyModel(t, 100, http.StatusServiceUnavailable)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
		want []string
	}{
		{"policy", sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 2})),
			[]string{"started llm m1", "retrying HTTP 503 Service Unavailable", "started llm m1 attempt=2", "succeeded", "completed"}},
		{"no policy", sdk.Transport(nil), []string{"started llm m1", "succeeded", "completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					return askModel(ctx, tc.rt, srv.URL)
				})
			}, sdk.WithClock(instantClock{newFakeClock()}))
			if err != nil || string(res.Output) != `"503 Service Unavailable {\"error\":\"slow down\"}"` {
				t.Fatalf("Run = %v, %v", res, err)
			}
			rwant(t, k, id, append([]string{"created a", "dispatch 1"}, tc.want...))
		})
	}

	t.Run("connection error", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 2}))
		k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				return askModel(ctx, rt, url)
			})
		}, sdk.WithClock(instantClock{newFakeClock()}))
		var se *sdk.StepError
		if !errors.As(err, &se) {
			t.Fatalf("Run = %v, want the step's error", err)
		}
		evs := events(t, k, id)
		if len(evs) != 7 || rdescribe(evs[3])[:9] != "retrying " || rdescribe(evs[4]) != "started llm m1 attempt=2" || rdescribe(evs[5])[:7] != "failed " {
			t.Fatalf("events %q", describeAllR(evs))
		}
	})

	t.Run("bad policy", func(t *testing.T) {
		rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 0}))
		var callErr, postErr, getErr error
		body := &closeCount{Reader: strings.NewReader(`{"model":"m"}`)}
		k, id, _, _ := runOnce(t, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				_, callErr = askModel(ctx, rt, srv.URL)
				// RoundTrip closes the body it refuses (http.RoundTripper's
				// contract), and refuses a request without one too.
				post, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
				_, postErr = rt.RoundTrip(post)
				get, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				_, getErr = rt.RoundTrip(get)
				return "", nil
			})
		})
		if !errors.Is(callErr, sdk.ErrInvalid) || !errors.Is(postErr, sdk.ErrInvalid) || !errors.Is(getErr, sdk.ErrInvalid) {
			t.Fatalf("requests = %v, %v, %v; want ErrInvalid", callErr, postErr, getErr)
		}
		if body.closes != 1 {
			t.Fatalf("the refused request's body was closed %d times, want once", body.closes)
		}
		rwant(t, k, id, []string{"created a", "dispatch 1", "completed"})
	})
}

func describeAllR(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = rdescribe(ev)
	}
	return out
}

// closeCount is a request body that counts its closes.
type closeCount struct {
	io.Reader
	closes int
}

func (c *closeCount) Close() error { c.closes++; return nil }
