package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
)

// Transport returns an http.RoundTripper that records every request made
// with a handler's context as an llm step and, when the step is recorded,
// returns the recorded status, headers and body without touching the
// network. Requests from outside a handler, or from inside a step's body,
// pass straight through to base (nil base: http.DefaultTransport).
//
// The step's target is the request body's "model" field when the body is a
// JSON object that has one, else host+path; its identity is computed over
// the target, the method, the path and query, and the canonical form of the
// body — never the headers, so credentials in headers are neither recorded
// nor part of identity, and never the scheme and host of a model request, so
// a recorded conversation replays through another base URL.
// Responses are read whole before they are recorded: a streamed response
// arrives all at once.
//
// A 429, a 5xx or a connection error is a failed attempt, retried under
// TransportRetry's policy (else the kernel's WithRetry; else not retried)
// after the policy's backoff or the response's Retry-After, whichever is
// longer (DESIGN §10). Only the final response is the step's result: a
// 429 or 5xx that is not retried is recorded, and returned, as the
// response; a final connection error is the step's error.
func Transport(base http.RoundTripper, opts ...TransportOption) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &transport{base: base}
	for _, opt := range opts {
		if opt != nil {
			opt(t)
		}
	}
	return t
}

type transport struct {
	base  http.RoundTripper
	retry *RetryPolicy // TransportRetry
	err   error        // a bad option: every request through a handler fails with it
}

// llmArgs is what an llm step records as its args.
type llmArgs struct {
	Method string          `json:"method"`
	URL    string          `json:"url"`            // path and query
	Body   json.RawMessage `json:"body,omitempty"` // canonical JSON, when the body is JSON
	Raw    []byte          `json:"raw,omitempty"`  // the body, when it is not
}

// llmResult is what an llm step records as its result.
type llmResult struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	d, err := dispatchFrom(ctx)
	if err != nil || ctx.Value(stepKey{}) != nil {
		return t.base.RoundTrip(req)
	}
	if t.err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, t.err
	}
	var body []byte
	if req.Body != nil {
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sdk: transport: read request body: %w", err)
		}
		if err := checkSize(len(body)); err != nil {
			return nil, fmt.Errorf("%w: sdk: transport: request body: %v", ErrInvalid, err)
		}
	}
	// The endpoint's scheme and host are left out of identity: the same
	// conversation sent to the same API through another base URL (a new
	// port, a proxy) is the same call.
	args := llmArgs{Method: req.Method, URL: req.URL.RequestURI()}
	target := req.URL.Host + req.URL.Path
	// A body that is not valid UTF-8 is recorded raw: as JSON its invalid
	// bytes would all read as U+FFFD, and two different requests would be
	// one call.
	if canon, err := canonicalJSON(body); err == nil && len(body) > 0 && utf8.Valid(body) {
		args.Body = canon
		var probe struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.Model != "" {
			target = probe.Model
		}
	} else {
		args.Raw = body
	}
	enc, err := canonicalArgs(args)
	if err != nil {
		return nil, fmt.Errorf("sdk: transport: %w", err)
	}
	res, err := d.do(ctx, call{
		kind: eventlog.StepLLM, target: target, args: enc, idem: eventlog.SafeToRetry, retry: t.retry,
		body: func(bctx context.Context) ([]byte, error) {
			out := req.Clone(bctx)
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			resp, err := t.base.RoundTrip(out)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return nil, fmt.Errorf("read response body: %w", err)
			}
			h := resp.Header.Clone()
			h.Del("Content-Length")
			rec, err := encodeValue(llmResult{Status: resp.StatusCode, Header: h, Body: b})
			if err != nil || !transientStatus(resp.StatusCode) {
				return rec, err
			}
			return nil, &attemptError{
				err:   fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)),
				final: rec,
				after: retryAfter(resp.Header.Get("Retry-After"), d.k.clock.Now()),
			}
		},
	})
	if err != nil {
		return nil, err
	}
	var r llmResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("sdk: transport: recorded response does not decode: %w", err)
	}
	return &http.Response{
		Status:        strconv.Itoa(r.Status) + " " + http.StatusText(r.Status),
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        r.Header,
		Body:          io.NopCloser(bytes.NewReader(r.Body)),
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}, nil
}

// TransportOption configures Transport.
type TransportOption func(*transport)

// TransportRetry retries an LLM call's 429, 5xx and connection errors
// under p (DESIGN §10), overriding the kernel's WithRetry for calls through
// this transport. The policy's Retryable, if set, sees an error whose text
// is "HTTP 429 Too Many Requests" (for a status) or the connection's
// error. A bad policy makes every recorded request fail with ErrInvalid,
// before anything is appended.
func TransportRetry(p RetryPolicy) TransportOption {
	return func(t *transport) {
		p, err := p.check()
		if err != nil {
			t.err = fmt.Errorf("sdk: transport: %w", err)
			return
		}
		t.retry = &p
	}
}

// transientStatus reports whether an HTTP status is a failed attempt that
// may be retried: 429 Too Many Requests and every 5xx.
func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500 && code <= 599
}

// retryAfter parses a Retry-After header — seconds, or an HTTP date
// relative to now — into the least backoff it asks for; 0 when it is
// absent or does not parse.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
