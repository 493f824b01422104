package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
//
// A streamed response — server-sent events (text/event-stream), or a body
// of unannounced length — reaches the caller as it arrives (DESIGN §16):
// the caller reads the upstream bytes while they are kept for the record,
// and step.succeeded, with the whole body and the headers, is appended
// when the caller's read reaches EOF. A stream that breaks is recorded
// step.failed, and the caller's read returns the same *StepError a replay
// returns; a break because the request's context ended is step.cancelled.
// A caller that closes the body early records what it read, marked
// Truncated, and so does a handler that returns or parks with the body
// still open: a replay returns exactly the bytes the caller saw. A stream
// whose record would pass MaxValueSize fails its step instead of being
// recorded cut short. Nothing is appended while bytes flow: the caller's
// reads never wait for the log until the last one. A body of announced
// length is read whole before it is returned.
//
// A replay, in a fork too, returns the recorded status, headers and body
// as a body the client's own parser reads (openai-go's and
// anthropic-sdk-go's streaming APIs among them). An override of a
// streamed step (WithResult) is served the same way: its body, whole, as
// one chunk.
//
// An llm step's step.succeeded records the response's token usage
// (Tokens), read from OpenAI's "usage" (a streamed reply's final chunk
// with stream_options.include_usage too) and Anthropic's usage (the
// message_start and message_delta events of a stream); a response in any
// other format records none.
//
// A 429, a 5xx or a connection error — or a stream that breaks before its
// first byte — is a failed attempt, retried under TransportRetry's policy
// (else the kernel's WithRetry; else not retried) after the policy's
// backoff or the response's Retry-After, whichever is longer (DESIGN
// §10); a stream that broke after its first byte reached the caller is
// final, never retried (§21½.8). Only the final response is the step's
// result: a 429 or 5xx that is not retried is recorded, and returned, as
// the response; a final connection error is the step's error.
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
			var first []byte
			if !transientStatus(resp.StatusCode) && streamed(resp) {
				// Retries apply before the first byte only (DESIGN
				// §21½.8): a stream that breaks before it is a failed
				// attempt; after it, the stream is the caller's.
				var eof bool
				first, eof, err = readFirst(resp.Body)
				if err != nil {
					_ = resp.Body.Close()
					return nil, fmt.Errorf("read response body: %w", err)
				}
				if !eof {
					si, _ := bctx.Value(stepKey{}).(*stepInfo)
					return nil, &streamHandoff{s: &liveStream{
						d: d, stepID: si.id, target: target, status: resp.StatusCode,
						header: resp.Header.Clone(), body: resp.Body, first: first,
					}}
				}
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return nil, fmt.Errorf("read response body: %w", err)
			}
			b = append(first, b...)
			h := resp.Header.Clone()
			h.Del("Content-Length")
			rec, err := encodeValue(llmResult{Status: resp.StatusCode, Header: h, Body: b})
			if err != nil || !transientStatus(resp.StatusCode) {
				return rec, err
			}
			return nil, &attemptError{
				err:    fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)),
				final:  rec,
				after:  retryAfter(resp.Header.Get("Retry-After"), d.k.clock.Now()),
				tokens: llmTokens(h, b),
			}
		},
	})
	if sh := (*streamHandoff)(nil); errors.As(err, &sh) {
		return sh.s.response(req), nil
	}
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
