package sdk

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/eventlog"
)

// A streamed response (DESIGN §16) reaches the caller as it arrives: the
// llm step's body reads the response's first bytes and hands the stream
// over (streamHandoff); the step stays started while the caller reads,
// and its terminal event is appended when the stream ends — at EOF
// (step.succeeded), when it breaks (step.failed, final), when the context
// of the request ends (step.cancelled), when the caller closes it early
// (step.succeeded Truncated), or when the handler returns or parks with it
// still open (step.succeeded Truncated, §21½.8). Nothing is appended while
// bytes flow: the caller's reads never wait for a synced append until the
// last one.

// streamHandoff is what an llm step's body returns when its response
// streams: the step has not ended, and live leaves its terminal event to
// the stream. It travels up to Transport as the call's error.
type streamHandoff struct{ s *liveStream }

func (h *streamHandoff) Error() string { return "sdk: the response streams" }

// streamed reports whether resp is read as a stream: a body the server
// sends as server-sent events, or whose length it did not announce
// (chunked). A body of known length is read whole, as before streaming.
func streamed(resp *http.Response) bool {
	if resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "text/event-stream" {
		return true
	}
	return resp.ContentLength < 0
}

// firstChunk is the size of the read that waits for a stream's first
// bytes before the response is handed over.
const firstChunk = 32 << 10

// readFirst reads a stream's first bytes. A stream that fails before its
// first byte is a failed attempt, retried like a connection error (DESIGN
// §21½.8: retries apply before the first byte only); one that ends at once
// is a whole body (eof).
func readFirst(body io.Reader) (first []byte, eof bool, err error) {
	buf := make([]byte, firstChunk)
	for {
		n, err := body.Read(buf)
		switch {
		case n > 0:
			return buf[:n], errors.Is(err, io.EOF), nil
		case errors.Is(err, io.EOF):
			return nil, true, nil
		case err != nil:
			return nil, false, err
		}
	}
}

// liveStream is the body a caller reads of a streamed llm response: it
// passes the upstream bytes through and keeps what the caller got.
type liveStream struct {
	d      *dispatch
	stepID string
	target string
	ctx    context.Context // the step's: its end makes a break step.cancelled
	span   trace.Span
	start  time.Time // of the step's attempt, for forkline.step.duration (zero: not metering)
	status int
	header http.Header
	body   io.ReadCloser // upstream

	// mu guards the fields below; Read does not hold it while it waits
	// for upstream bytes, so that Close (or the dispatch's end) is never
	// blocked by a slow stream.
	mu    sync.Mutex
	first []byte // read upstream before the handoff, not yet given to the caller
	got   []byte // every byte given to the caller, in order
	index int    // of the next delta
	done  bool
	err   error // what Read returns once done
	// reading is set while Read waits for upstream bytes without s.mu.
	reading bool
}

// closeProbe bounds Close's look for the end of a stream its caller
// stopped reading (atEndLocked).
const closeProbe = 50 * time.Millisecond

// errStreamClosed is what a read of a stream returns after Close.
var errStreamClosed = errors.New("sdk: read on a closed model response")

// Read implements io.Reader.
func (s *liveStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	if s.done {
		defer s.mu.Unlock()
		return 0, s.err
	}
	if len(s.first) > 0 {
		defer s.mu.Unlock()
		n := copy(p, s.first)
		s.first = s.first[n:]
		if err := s.deliverLocked(p[:n]); err != nil {
			return 0, err
		}
		return n, nil
	}
	s.reading = true
	s.mu.Unlock()
	n, rerr := s.body.Read(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reading = false
	if s.done {
		// Closed, or ended with the dispatch, while the read waited: what
		// it read was never the caller's.
		return 0, s.err
	}
	if n > 0 {
		if err := s.deliverLocked(p[:n]); err != nil {
			return 0, err
		}
	}
	switch {
	case rerr == nil:
		return n, nil
	case errors.Is(rerr, io.EOF):
		// io.EOF once step.succeeded is appended; else the step's error.
		return n, s.endLocked(s.succeeded(false), io.EOF)
	default:
		return n, s.breakLocked(rerr)
	}
}

// deliverLocked keeps b, which the caller is given, and publishes it as a
// delta. A stream whose record would pass MaxValueSize fails its step
// instead: it is never recorded cut short silently. s.mu is held.
func (s *liveStream) deliverLocked(b []byte) error {
	// The body is recorded as base64 inside the result's JSON.
	if n := base64.StdEncoding.EncodedLen(len(s.got) + len(b)); n > MaxValueSize {
		_ = s.body.Close()
		msg := fmt.Sprintf("streamed response passed the %d-byte limit of a recorded value (MaxValueSize) after %d bytes; it is not recorded",
			MaxValueSize, len(s.got)+len(b))
		return s.failLocked(msg)
	}
	s.got = append(s.got, b...)
	s.d.k.publishDelta(s.d.id, Delta{StepID: s.stepID, Index: s.index, Data: b})
	s.index++
	return nil
}

// succeeded is the step.succeeded of what the caller got.
func (s *liveStream) succeeded(truncated bool) eventlog.Payload {
	h := s.header.Clone()
	h.Del("Content-Length")
	rec, err := encodeValue(llmResult{Status: s.status, Header: h, Body: s.got})
	if err != nil {
		return &eventlog.StepFailed{StepID: s.stepID, Error: fmt.Sprintf("streamed response not recorded: %v", err)}
	}
	return &eventlog.StepSucceeded{StepID: s.stepID, Result: rec, Tokens: llmTokens(s.header, s.got), Truncated: truncated}
}

// breakLocked ends a stream that broke with rerr after bytes reached the
// caller: final, never retried (DESIGN §21½.8) — step.cancelled when the
// step's context ended, else step.failed. It returns the caller's error.
// s.mu is held.
func (s *liveStream) breakLocked(rerr error) error {
	_ = s.body.Close()
	if s.ctx.Err() != nil {
		return s.endLocked(&eventlog.StepCancelled{StepID: s.stepID}, nil)
	}
	return s.failLocked(fmt.Sprintf("stream broke after %d bytes: %v", len(s.got), rerr))
}

// failLocked ends the stream's step failed with msg, the caller's error
// as on replay. s.mu is held.
func (s *liveStream) failLocked(msg string) error {
	// The usage that arrived before the break was spent (Anthropic's
	// message_start carries the input tokens): it counts (DESIGN §21½.9).
	return s.endLocked(&eventlog.StepFailed{StepID: s.stepID, Error: msg, Tokens: llmTokens(s.header, s.got)}, nil)
}

// Close implements io.Closer: a stream closed before its end records what
// the caller read, Truncated. A caller that read every byte and closes
// before the read that returns io.EOF — an SSE client stops at its
// terminating event — has read it whole: Close looks for the end
// (atEndLocked) and records it not Truncated.
func (s *liveStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	truncated := !s.atEndLocked()
	_ = s.body.Close()
	err := s.endLocked(s.succeeded(truncated), errStreamClosed)
	if errors.Is(err, errStreamClosed) {
		return nil
	}
	return err
}

// atEndLocked reports whether the upstream body is at its end: nothing
// is left to give the caller and one read, waited for at most
// closeProbe, returns io.EOF without a byte. A byte it reads was never
// the caller's, so the stream is then not whole. s.mu is held and no Read
// is waiting upstream.
func (s *liveStream) atEndLocked() bool {
	if s.reading || len(s.first) > 0 {
		return false
	}
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var b [1]byte
		n, err := s.body.Read(b[:])
		ch <- result{n, err}
	}()
	t := time.NewTimer(closeProbe)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.n == 0 && errors.Is(r.err, io.EOF)
	case <-t.C:
		_ = s.body.Close() // ends the read; its result is dropped
		return false
	}
}

// endLocked appends the stream's terminal event and returns the error
// the caller gets from Read from now on: then (EOF, or the closed
// stream's error) for a step.succeeded, the *StepError of a step.failed,
// the cancellation of a step.cancelled — or the append's error. A
// stopped dispatch (DESIGN §15½.1) records step.cancelled, whatever the
// stream did. s.mu is held.
func (s *liveStream) endLocked(terminal eventlog.Payload, then error) error {
	_ = s.body.Close()
	s.done = true
	d := s.d
	// Other processes' watchers get the stream's deltas before its end.
	d.k.carry.flush(s.ctx)
	d.mu.Lock()
	if d.stoppedLocked() {
		terminal = &eventlog.StepCancelled{StepID: s.stepID}
	}
	err := d.appendLocked(false, terminal)
	if errors.Is(err, errStopped) {
		// It ended as the outcome was being recorded.
		terminal = &eventlog.StepCancelled{StepID: s.stepID}
		err = d.appendLocked(false, terminal)
	}
	cause := s.ctx.Err()
	if d.stopped || cause == nil {
		cause = stopCause(d.caller)
	}
	d.mu.Unlock()
	d.dropStream(s)

	outcome := "succeeded"
	switch t := terminal.(type) {
	case *eventlog.StepSucceeded:
		s.err = then
	case *eventlog.StepFailed:
		outcome = "failed"
		s.err = &StepError{StepID: s.stepID, Target: s.target, Message: t.Error}
	case *eventlog.StepCancelled:
		outcome = "cancelled"
		if cause == nil {
			cause = context.Canceled
		}
		s.err = fmt.Errorf("sdk: %s %q cancelled: %w", eventlog.StepLLM, s.target, cause)
	}
	if err != nil {
		outcome, s.err = "unrecorded", err
	}
	var serr error
	if outcome != "succeeded" {
		serr = s.err
	}
	d.k.tel.stepEnded(s.span, eventlog.StepLLM, outcome, serr, s.start)
	return s.err
}

// response is the caller's response of a live stream.
func (s *liveStream) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", s.status, http.StatusText(s.status)),
		StatusCode:    s.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        s.header.Clone(),
		Body:          s,
		ContentLength: -1,
		Request:       req,
	}
}

// addStream registers a stream the dispatch's end must finish.
func (d *dispatch) addStream(s *liveStream) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	d.streams = append(d.streams, s)
}

// dropStream forgets a stream that ended.
func (d *dispatch) dropStream(s *liveStream) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if i := slices.Index(d.streams, s); i >= 0 {
		d.streams = slices.Delete(d.streams, i, i+1)
	}
}

// endStreams ends every stream still open when the handler returns or
// parks: each records what its caller read, Truncated (DESIGN §21½.8),
// in the order they opened, before anything else the dispatch appends.
func (d *dispatch) endStreams() {
	d.streamMu.Lock()
	open := slices.Clone(d.streams)
	d.streamMu.Unlock()
	for _, s := range open {
		s.mu.Lock()
		if !s.done {
			_ = s.endLocked(s.succeeded(true), errStreamClosed)
		}
		s.mu.Unlock()
	}
}
