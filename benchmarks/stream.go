package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkline/forkline/sdk"
)

// Scenario 10, model replies that stream (DESIGN §16). A local server
// streams server-sent events, flushing each event; a handler on a synced
// kernel on disk posts a chat request and reads the reply.
//
//   - 11a, time to first byte: from the request to the first byte of the
//     body the caller reads, through sdk.Transport (the step's identity,
//     its step.started, the round trip, the read of the first chunk) and
//     directly (http.DefaultTransport) in the same handler. Target: the
//     Transport adds under 1 ms at the median; p99 in the note.
//   - 11b, per-chunk overhead: the reads, one event each, of the events
//     after the first of a reply of streamChunks events, already arrived
//     (before the EOF that appends step.succeeded), through the Transport
//     and directly, divided by the events.
//
// Samples alternate between the two, one of each in turn.

// streamSamples is how many samples of each contestant a round takes.
const streamSamples = 100

// streamChunks is the events of 11b's reply.
const streamChunks = 256

// streamEvent is one event of the reply (64 bytes).
var streamEvent = "data: " + strings.Repeat("x", 56) + "\n\n"

// streamBench is the server and the kernel the samples use.
type streamBench struct {
	srv    *httptest.Server
	k      *sdk.Kernel
	rt     http.RoundTripper
	direct *http.Client
	closer func()
}

func newStreamBench(ctx context.Context, dir string) (*streamBench, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if strings.Contains(r.URL.RawQuery, "long") {
			n = streamChunks
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		// The first event at once; the rest in one write, so that the
		// client's reads of them wait for no one.
		_, _ = io.WriteString(w, streamEvent)
		w.(http.Flusher).Flush()
		if n > 1 {
			time.Sleep(time.Millisecond) // the first read gets the first event alone
			_, _ = io.WriteString(w, strings.Repeat(streamEvent, n-1))
		}
	}))
	k, err := sdk.Open(filepath.Join(dir, "log"))
	if err != nil {
		srv.Close()
		return nil, err
	}
	b := &streamBench{srv: srv, k: k, rt: sdk.Transport(nil), direct: &http.Client{}}
	b.closer = func() { _ = k.Close(); srv.Close() }
	return b, nil
}

// sample is one request's timings in µs: to the first byte, and from it
// to the last byte of the reply.
type sample struct{ first, rest float64 }

// measure posts the n-th request (a new identity each time) with client
// and times it.
func (b *streamBench) measure(ctx context.Context, client *http.Client, n int, long bool) (sample, error) {
	url := b.srv.URL + "/v1/chat/completions"
	size := len(streamEvent)
	if long {
		url += "?long"
		size *= streamChunks
	}
	body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":"question %d"}]}`, n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	// One event per read: a parser's read of each event is what 11b
	// measures.
	buf := make([]byte, len(streamEvent))
	got, err := resp.Body.Read(buf)
	first := time.Now()
	if got == 0 {
		return sample{}, fmt.Errorf("stream: no first byte: %v", err)
	}
	if long {
		// The rest arrives meanwhile (1 ms after the first); its reads
		// alone are timed.
		time.Sleep(3 * time.Millisecond)
		first = time.Now()
	}
	for got < size && err == nil {
		var m int
		m, err = resp.Body.Read(buf)
		got += m
	}
	last := time.Now()
	if got != size {
		return sample{}, fmt.Errorf("stream: read %d of %d bytes: %v", got, size, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return sample{}, err
	}
	return sample{first: float64(first.Sub(start).Nanoseconds()) / 1000, rest: float64(last.Sub(first).Nanoseconds()) / 1000}, nil
}

// rounds runs rounds of streamSamples samples of each contestant inside
// one execution per round and returns each contestant's samples (µs),
// through the Transport first.
func (b *streamBench) rounds(ctx context.Context, rounds int, long bool) (via, direct [][]sample, err error) {
	name := fmt.Sprintf("stream-%v", long)
	through := &http.Client{Transport: b.rt}
	if _, err := sdk.Register(b.k, name, func(ctx context.Context, round int) (int, error) {
		var v, d []sample
		for i := range streamSamples {
			s, err := b.measure(ctx, through, round*streamSamples+i, long)
			if err != nil {
				return 0, err
			}
			v = append(v, s)
			if s, err = b.measure(ctx, b.direct, i, long); err != nil {
				return 0, err
			}
			d = append(d, s)
		}
		via, direct = append(via, v), append(direct, d)
		return 0, nil
	}); err != nil {
		return nil, nil, err
	}
	for r := range rounds {
		id, err := b.k.Start(ctx, name, r)
		if err != nil {
			return nil, nil, err
		}
		if _, err := b.k.Run(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	return via, direct, nil
}

func runStream(e *env) ([]Row, error) {
	dir, err := e.mkdir("stream")
	if err != nil {
		return nil, err
	}
	b, err := newStreamBench(e.ctx, dir)
	if err != nil {
		return nil, err
	}
	defer b.closer()
	rounds := max(e.cfg.Rounds, 1)

	load := loadAverage()[0]
	via, direct, err := b.rounds(e.ctx, rounds, false)
	if err != nil {
		return nil, err
	}
	pick := func(rs [][]sample, f func(sample) float64) (all, meds []float64) {
		for _, r := range rs {
			var xs []float64
			for _, s := range r {
				xs = append(xs, f(s))
			}
			all, meds = append(all, xs...), append(meds, median(xs))
		}
		return all, meds
	}
	first := func(s sample) float64 { return s.first }
	va, vr := pick(via, first)
	da, dr := pick(direct, first)
	fl := Figure{What: "through sdk.Transport, median", Value: median(va), Unit: "µs", Rounds: vr}
	base := Figure{What: "http.DefaultTransport, median", Value: median(da), Unit: "µs", Rounds: dr}
	added := func(f, b float64) float64 { return f - b }
	a := rowOfMedians("11a", "model reply streamed: time to first byte through sdk.Transport vs direct", "Stream/what=ttfb/via=transport",
		fl, base, added, "µs added at the median", "< 1,000 µs", func(r float64) bool { return r < 1000 }, load)
	a.Note = fmt.Sprintf("%d samples of each, alternating, in %d executions on a synced kernel on disk (sdk.Open); a local server streams server-sent events, each flushed. p99 %.0f µs through the Transport, %.0f µs direct (max %.0f and %.0f). Through the Transport the time holds the call's identity, its step.started (unsynced: it rides on the step.succeeded's sync at EOF) and the read of the first chunk before the response is handed over.",
		len(va), rounds, quantile(va, 0.99), quantile(da, 0.99), slices.Max(va), slices.Max(da))

	load = loadAverage()[0]
	via, direct, err = b.rounds(e.ctx, rounds, true)
	if err != nil {
		return nil, err
	}
	perChunk := func(s sample) float64 { return s.rest / (streamChunks - 1) }
	va, vr = pick(via, perChunk)
	da, dr = pick(direct, perChunk)
	fl = Figure{What: "through sdk.Transport, median", Value: median(va), Unit: "µs", Rounds: vr}
	base = Figure{What: "http.DefaultTransport, median", Value: median(da), Unit: "µs", Rounds: dr}
	c := rowOfMedians("11b", fmt.Sprintf("model reply streamed: time per event of a %d-event reply through sdk.Transport vs direct", streamChunks), "Stream/what=event/via=transport",
		fl, base, added, "µs added per event", "", nil, load)
	c.Note = fmt.Sprintf("The reads of events 2 to %d of a reply (64-byte events, one per read, the server having sent them 2 ms before the first of them is read), divided by the events; the EOF read that appends step.succeeded is not in it. p99 %.2f µs per event through the Transport, %.2f µs direct. Each event read is kept for the record and offered to WatchDeltas (no watcher here). The read alone, from an upstream in memory: go test -run '^$' -bench StreamRead ./sdk.",
		streamChunks, quantile(va, 0.99), quantile(da, 0.99))
	return []Row{a, c}, nil
}
