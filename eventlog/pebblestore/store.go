package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// storeFormat is the version of the key layout and value encodings, stored
// under the meta key of every log. Format 2 added the state records ('s');
// a format 1 log is migrated when it is opened (migrateFormat1). Format 3
// added tombstones ('t'); a format 2 log needs nothing but the new byte.
const storeFormat byte = 3

// ErrNotALog is returned by Open for a folder that holds files but no
// forkline log (and, with ReadOnly, for a missing or empty folder).
var ErrNotALog = errors.New("pebblestore: not a forkline log")

// ErrLocked is returned by Open when another process (or another Open in this
// process) has the log open.
var ErrLocked = errors.New("pebblestore: log is in use")

// Option configures Open.
type Option func(*options)

type options struct {
	noSync     bool
	readOnly   bool
	reserve    int64
	ballast    int64
	chunkAbove int
	chunkSet   bool
	// acceptWALLoss skips the check of the side record (AcceptWALLoss).
	acceptWALLoss bool
	mem           vfs.FS // set by Clone only: the memory holding memName
	memName       string
}

// WithoutSync makes appends return before the write-ahead log reaches the
// disk. A crash may then lose acknowledged appends. For tests and benchmarks.
func WithoutSync() Option { return func(o *options) { o.noSync = true } }

// Store is the Pebble implementation of eventlog.Log and eventlog.Index.
type Store struct {
	db       *pebble.DB
	write    *pebble.WriteOptions
	dir      string
	mem      vfs.FS // the memory of an in-memory store, nil on disk
	readOnly bool
	migrate  bool // the format key says store format 1: checkFormat migrates it
	upgrade  bool // the format key says store format 2: checkFormat writes 3
	faults   *faults
	space    diskSpace
	release  func() // releases the folder's claim in this process
	// mark keeps the write-ahead log's synced position (walmark.go); nil
	// for a read-only or in-memory store.
	mark *walMark
	// acceptWALLoss is AcceptWALLoss.
	acceptWALLoss bool

	// life guards the DB against Close: every operation is counted in
	// active while it runs; once closing is set, new operations fail with
	// ErrClosed at once (so a call made inside an iteration while Close
	// waits fails instead of blocking), and Close waits for the running ones.
	life struct {
		sync.Mutex
		closing bool
		active  sync.WaitGroup
	}
	mu struct {
		sync.Mutex
		execs map[eventlog.ID]*execution
	}
	// keyMu orders Creates with an idempotency key.
	keyMu sync.Mutex
	// tree orders Fork (read) against Delete (write): Delete reads which
	// forks an execution has, and a fork made meanwhile must not read
	// events that Delete drops.
	tree sync.RWMutex
	// chunkAbove is the record length above which appends store chunks
	// (chunks.go); chunks orders appends that write chunks (read) against
	// Sweep (write).
	chunkAbove int
	chunks     sync.RWMutex
	// known remembers chunks the store holds (chunks.go).
	known struct {
		sync.Mutex
		set map[chunkHash]struct{}
	}
	// limits orders every TakeLimit (limiter.go).
	limits sync.Mutex
	// schedules orders every write of a schedule record (schedule.go), so
	// AdvanceSchedule's compare and set are one step.
	schedules sync.Mutex
	// queues orders every ClaimToRun and every write of a queue record
	// (queue.go); held lists, per queue, the executions a ClaimToRun
	// claimed whose slot may still be held; recs caches the queue
	// records read (a nil entry: none), which only PutQueue changes.
	queues struct {
		sync.Mutex
		held map[string]map[*execution]struct{}
		recs map[string]*eventlog.Queue
	}
}

var (
	_ eventlog.IndexedLog     = (*Store)(nil)
	_ eventlog.Inbox          = (*Store)(nil)
	_ eventlog.PrefixVerifier = (*Store)(nil)
)

// execution is the cached, in-process state of one execution. Its header and
// lineage never change; head and index are those of the newest append.
type execution struct {
	id      eventlog.ID
	hdr     header
	lineage []segment // root first; the last is the execution's own
	// deleted is set once the execution is a tombstone (delete.go): no
	// operation finds it any more, but its forks read its kept prefix.
	deleted atomic.Bool

	mu struct {
		sync.Mutex
		loaded bool
		head   uint64
		status eventlog.StatusState // as of head
		index  *eventlog.IndexState // nil until an append needs it
		lease  eventlog.LeaseState  // in memory: see lease.go
		inbox  inbox                // see inbox.go
		retry  retryNote            // in memory: see retry.go
		// quarantine is the error that quarantined the execution, "" for
		// none (retry.go): kept under its own key, read by loadLocked.
		quarantine string
	}
	// slot is, while the execution holds a slot of its queue (queue.go),
	// its lease's expiry in Unix nanoseconds; 0 while it holds none. It
	// is written under mu (syncSlotLocked) and read without it.
	slot atomic.Int64
}

// segment is the part of a lineage held by one execution: seqs lo..hi.
type segment struct {
	id     eventlog.ID
	lo, hi uint64
}

// migrateFormat1 turns a store of format 1 into format 2: it folds every
// execution's own events (a fork's from its fork.created: a status is a
// fold of the execution's own run) into its state record, and writes the
// records and the new format byte in one synced batch, so a crash leaves
// the store in format 1 and the next Open migrates again. An execution
// whose own events cannot be read gets no record: reading it then reports
// the corruption. The events themselves are not rewritten: a format 2
// store reads format 1 records.
func (s *Store) migrateFormat1() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagHeader}, UpperBound: []byte{tagHeader + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: migrate to store format %d: %w", storeFormat, err)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			continue
		}
		id := eventlog.ID(k[1:17])
		var hdr header
		if decodeValue(it.Value(), &hdr) != nil {
			continue
		}
		st, ok := s.foldOwn(id, hdr.At+1)
		if !ok {
			continue
		}
		v, err := encodeStateValue(st, 0, 0)
		if err != nil {
			return fmt.Errorf("pebblestore: migrate to store format %d: %w", storeFormat, err)
		}
		_ = b.Set(stateKey(id), v, nil)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("pebblestore: migrate to store format %d: %w", storeFormat, err)
	}
	_ = b.Set(metaFormatKey, []byte{storeFormat}, nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: migrate to store format %d: %w", storeFormat, err)
	}
	return nil
}

// foldOwn folds the status of id's own events, from seq lo on. It reports
// false when they are not dense from lo or one does not decode.
func (s *Store) foldOwn(id eventlog.ID, lo uint64) (eventlog.StatusState, bool) {
	prefix := executionPrefix(tagEvent, id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(id, lo), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return eventlog.StatusState{}, false
	}
	defer it.Close()
	var st eventlog.StatusState
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 25 || eventSeq(k) != want {
			return eventlog.StatusState{}, false
		}
		ev, err := eventlog.DecodeRecord(id, want, it.Value())
		if err != nil {
			return eventlog.StatusState{}, false
		}
		st.Apply(ev)
		want++
	}
	return st, it.Error() == nil && want > lo
}

// enter counts an operation in; the caller must call s.leave when done.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	if s.life.closing {
		return eventlog.ErrClosed
	}
	s.life.active.Add(1)
	return nil
}

// leave counts an operation out.
func (s *Store) leave() { s.life.active.Done() }

// Create implements eventlog.Log.
func (s *Store) Create(ctx context.Context, created *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	if err := s.writable(); err != nil {
		return eventlog.ID{}, err
	}
	if created == nil {
		return eventlog.ID{}, fmt.Errorf("%w: nil execution.created", eventlog.ErrInvalid)
	}
	if at.IsZero() {
		at = time.Now()
	}
	ev := eventlog.Event{Seq: 1, Time: at, Data: created}
	id := eventlog.NewID()
	rec, err := eventlog.AppendRecord(nil, id, ev)
	if err != nil {
		return eventlog.ID{}, err
	}
	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	if created.Key != "" {
		// One keyed Create at a time: the check and the write are atomic.
		s.keyMu.Lock()
		defer s.keyMu.Unlock()
		if id, found, err := s.keyed(created); found || err != nil {
			return id, err
		}
	}
	o := eventlog.NewCreateOptions(opts)
	if o.CallerStep != "" && o.Caller.IsZero() {
		return eventlog.ID{}, fmt.Errorf("%w: create: a caller step (%q) with no caller", eventlog.ErrInvalid, o.CallerStep)
	}
	hdr, err := encodeValue(&header{Agent: created.Agent, Created: nanos(at), Caller: o.Caller, CallerStep: o.CallerStep, Key: created.Key, Version: created.Version,
		Queue: created.Queue, Priority: created.Priority})
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: encode header: %w", err)
	}
	var st eventlog.StatusState
	st.Apply(ev)
	sv, err := encodeStateValue(st, 0, 0)
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: encode state: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(headerKey(id), hdr, nil)
	_ = b.Set(stateKey(id), sv, nil)
	_ = b.Set(eventKey(id, 1), rec, nil)
	if created.Key != "" {
		_ = b.Set(idemKey(created.Key), id[:], nil)
	}
	if err := s.commit(b, s.write); err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: create execution: %w", err)
	}
	return id, nil
}

// keyed looks up created.Key: the execution it names, if any, when its
// agent and input equal created's, and ErrConflict when they differ.
// s.keyMu is held.
func (s *Store) keyed(created *eventlog.ExecutionCreated) (eventlog.ID, bool, error) {
	v, closer, err := s.db.Get(idemKey(created.Key))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventlog.ID{}, false, nil
	}
	if err != nil {
		return eventlog.ID{}, false, fmt.Errorf("pebblestore: read key %q: %w", created.Key, err)
	}
	defer closer.Close()
	if len(v) != len(eventlog.ID{}) {
		return eventlog.ID{}, false, &eventlog.CorruptionError{What: "idempotency key " + strconv.Quote(created.Key),
			Err: fmt.Errorf("value of %d bytes", len(v))}
	}
	id := eventlog.ID(v)
	var first *eventlog.ExecutionCreated
	for ev, err := range s.Events(context.Background(), id, 1) {
		if err != nil {
			return eventlog.ID{}, false, err
		}
		first, _ = ev.Data.(*eventlog.ExecutionCreated)
		break
	}
	if first == nil {
		return eventlog.ID{}, false, &eventlog.CorruptionError{Execution: id, Seq: 1,
			What: "event", Err: fmt.Errorf("idempotency key %q names an execution without execution.created", created.Key)}
	}
	if first.Agent != created.Agent || !bytes.Equal(first.Input, created.Input) {
		return eventlog.ID{}, false, fmt.Errorf("%w: key %q is execution %s of agent %q with input %.100s; now agent %q with input %.100s",
			eventlog.ErrConflict, created.Key, id, first.Agent, first.Input, created.Agent, created.Input)
	}
	return id, true, nil
}

// execution returns the cached state of id, reading its header and those of
// its ancestors on first use. The caller has entered.
func (s *Store) execution(id eventlog.ID) (*execution, error) {
	e, err := s.executionBelow(id, nil)
	if err != nil {
		return nil, err
	}
	if e.deleted.Load() {
		return nil, errDeleted(id)
	}
	return e, nil
}

// errDeleted is the error of an operation on a deleted execution.
func errDeleted(id eventlog.ID) error {
	return fmt.Errorf("%w: execution %s (deleted)", eventlog.ErrNotFound, id)
}

// executionBelow is execution for the parent of the executions in
// descendants, whose lineages are being built: a header chain that leads
// back to one of them is corrupt (and would otherwise recurse forever).
func (s *Store) executionBelow(id eventlog.ID, descendants []eventlog.ID) (*execution, error) {
	s.mu.Lock()
	e, ok := s.mu.execs[id]
	s.mu.Unlock()
	if ok {
		return e, nil
	}
	hdr, err := s.readHeader(id)
	if err != nil {
		return nil, err
	}
	e = &execution{id: id, hdr: hdr}
	if _, deleted, err := s.readTombstone(id); err != nil {
		return nil, err
	} else if deleted {
		e.deleted.Store(true)
	}
	if hdr.Parent.IsZero() {
		e.lineage = []segment{{id: id, lo: 1, hi: math.MaxUint64}}
	} else {
		descendants = append(descendants, id)
		if slices.Contains(descendants, hdr.Parent) {
			return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: fmt.Errorf("parent %s is its own descendant", hdr.Parent)}
		}
		parent, err := s.executionBelow(hdr.Parent, descendants)
		if err != nil {
			if errors.Is(err, eventlog.ErrNotFound) {
				return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: fmt.Errorf("parent %s is missing", hdr.Parent)}
			}
			return nil, err
		}
		for _, seg := range parent.lineage {
			if seg.lo > hdr.At {
				break
			}
			seg.hi = min(seg.hi, hdr.At)
			e.lineage = append(e.lineage, seg)
		}
		e.lineage = append(e.lineage, segment{id: id, lo: hdr.At + 1, hi: math.MaxUint64})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.mu.execs[id]; ok {
		return prev, nil
	}
	s.mu.execs[id] = e
	return e, nil
}

func (s *Store) readHeader(id eventlog.ID) (header, error) {
	v, closer, err := s.db.Get(headerKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return header{}, fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
	}
	if err != nil {
		return header{}, s.readErr(id, "header", err)
	}
	defer closer.Close()
	var h header
	if err := decodeValue(v, &h); err != nil {
		return header{}, &eventlog.CorruptionError{Execution: id, What: "header", Err: err}
	}
	if h.Agent == "" || (h.Parent.IsZero() != (h.At == 0)) {
		return header{}, &eventlog.CorruptionError{Execution: id, What: "header", Err: errors.New("inconsistent header")}
	}
	return h, nil
}

// loadLocked makes e.mu's head and status current, from e's state record,
// and checks the head: the event at the recorded head exists and none
// follows it, so a lost newest event is reported rather than read as a
// shorter lineage. e.mu is held.
func (s *Store) loadLocked(e *execution) error {
	if e.deleted.Load() {
		return errDeleted(e.id)
	}
	if e.mu.loaded {
		return nil
	}
	v, closer, err := s.db.Get(stateKey(e.id))
	if errors.Is(err, pebble.ErrNotFound) {
		return &eventlog.CorruptionError{Execution: e.id, What: "state", Err: errors.New("no state record")}
	}
	if err != nil {
		return fmt.Errorf("pebblestore: execution %s: read state: %w", e.id, err)
	}
	st, requests, epoch, err := decodeStateValue(v)
	closer.Close()
	if err != nil {
		return &eventlog.CorruptionError{Execution: e.id, What: "state", Err: err}
	}
	if st.Head <= e.hdr.At {
		return &eventlog.CorruptionError{Execution: e.id, What: "state", Err: fmt.Errorf("head %d is not past the fork point %d", st.Head, e.hdr.At)}
	}
	last, err := s.ownHead(e)
	if err != nil {
		return err
	}
	switch {
	case last < st.Head:
		return &eventlog.CorruptionError{Execution: e.id, Seq: st.Head, What: "event", Err: errors.New("newest event missing from the log")}
	case last > st.Head:
		return &eventlog.CorruptionError{Execution: e.id, Seq: last, What: "event", Err: fmt.Errorf("event past the recorded head %d", st.Head)}
	}
	if e.mu.quarantine, err = s.readQuarantine(e.id); err != nil {
		return err
	}
	e.mu.head, e.mu.status = st.Head, st
	e.syncSlotLocked()
	e.mu.index = nil
	e.mu.inbox = inbox{last: requests} // the pending requests are read on first use
	// The lease itself lives in memory (a reopened store finds every
	// execution ownerless); its epoch only rises (DESIGN §15½.5).
	e.mu.lease.Epoch = max(e.mu.lease.Epoch, epoch)
	e.mu.loaded = true
	return nil
}

// indexLocked returns e's index fold as of its head, reading it on first
// use. e.mu is held and loaded.
func (s *Store) indexLocked(e *execution) (*eventlog.IndexState, error) {
	if e.mu.index == nil {
		states, err := s.resourceStates(e, e.mu.head)
		if err != nil {
			return nil, err
		}
		e.mu.index = eventlog.NewIndexState(states)
	}
	return e.mu.index, nil
}

// ownHead reads the seq of e's newest own event, 0 if it has none.
func (s *Store) ownHead(e *execution) (uint64, error) {
	prefix := executionPrefix(tagEvent, e.id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, s.readErr(e.id, "head", err)
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return 0, s.readErr(e.id, "head", err)
		}
		return 0, nil
	}
	k := it.Key()
	if len(k) != 25 {
		return 0, &eventlog.CorruptionError{Execution: e.id, What: "event key", Err: fmt.Errorf("key of %d bytes", len(k))}
	}
	return eventSeq(k), nil
}

// Head implements eventlog.Log.
func (s *Store) Head(ctx context.Context, id eventlog.ID) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.loadLocked(e); err != nil {
		return 0, err
	}
	return e.mu.head, nil
}

// Info implements eventlog.Log. It reads the execution's header and state
// record (cached after the first read): it never folds the lineage.
func (s *Store) Info(ctx context.Context, id eventlog.ID) (eventlog.Info, error) {
	if err := s.enter(ctx); err != nil {
		return eventlog.Info{}, err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return eventlog.Info{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.loadLocked(e); err != nil {
		return eventlog.Info{}, err
	}
	return e.infoLocked(), nil
}

// infoLocked describes e as of its cached head. e.mu is held and loaded.
func (e *execution) infoLocked() eventlog.Info {
	st := e.mu.status
	return eventlog.Info{
		ID: e.id, Agent: e.hdr.Agent, Parent: e.hdr.Parent, ForkSeq: e.hdr.At,
		Head: e.mu.head, Created: timeFromNanos(e.hdr.Created),
		Status: st.Status, Updated: st.Updated, WakeAt: st.WakeAt, Deadline: st.Deadline, Tokens: st.Tokens,
		Caller: e.hdr.Caller, Approvals: slices.Clone(st.Approvals), Key: e.hdr.Key, Version: e.hdr.Version,
		Queue: e.hdr.Queue, Priority: e.hdr.Priority,
		LastError: e.mu.retry.lastError, RetryAt: e.mu.retry.at, AwaitedOwner: e.mu.retry.owner,
		Quarantined: e.mu.quarantine != "", QuarantineError: e.mu.quarantine,
	}
}

// LookupKey implements eventlog.KeyLookup: it reads the key's index entry
// and never creates.
func (s *Store) LookupKey(ctx context.Context, key string) (eventlog.ID, error) {
	if key == "" {
		return eventlog.ID{}, fmt.Errorf("%w: lookup of an empty key", eventlog.ErrInvalid)
	}
	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	v, closer, err := s.db.Get(idemKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventlog.ID{}, fmt.Errorf("%w: no execution has key %q", eventlog.ErrNotFound, key)
	}
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: read key %q: %w", key, err)
	}
	defer closer.Close()
	if len(v) != len(eventlog.ID{}) {
		return eventlog.ID{}, &eventlog.CorruptionError{What: "idempotency key " + strconv.Quote(key),
			Err: fmt.Errorf("value of %d bytes", len(v))}
	}
	return eventlog.ID(v), nil
}

// List implements eventlog.Log. It reads headers in ID order from
// f.After and each candidate's state record; it never reads events.
func (s *Store) List(ctx context.Context, f eventlog.Filter) iter.Seq2[eventlog.Info, error] {
	return func(yield func(eventlog.Info, error) bool) {
		if err := f.Validate(); err != nil {
			yield(eventlog.Info{}, err)
			return
		}
		after := f.After
		for {
			// A page at a time, so that nothing is held while yielding.
			page, last, err := s.listPage(ctx, f, after, 256)
			if err != nil {
				yield(eventlog.Info{}, err)
				return
			}
			for _, info := range page {
				if !yield(info, nil) {
					return
				}
				if f.Limit > 0 {
					if f.Limit--; f.Limit == 0 {
						return
					}
				}
			}
			if last.IsZero() {
				return
			}
			after = last
		}
	}
}

// listPage returns up to n executions after after that f matches, reading
// at most 16n headers, and the ID of the last header it read when more may
// follow (zero when the table ended).
func (s *Store) listPage(ctx context.Context, f eventlog.Filter, after eventlog.ID, n int) ([]eventlog.Info, eventlog.ID, error) {
	var none eventlog.ID
	if err := s.enter(ctx); err != nil {
		return nil, none, err
	}
	defer s.leave()
	lower := []byte{tagHeader}
	if !after.IsZero() {
		lower = append(headerKey(after), 0) // the first key after after's header
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{tagHeader + 1}})
	if err != nil {
		return nil, none, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer it.Close()
	var out []eventlog.Info
	scanned := 0
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, none, err
		}
		k := it.Key()
		if len(k) != 17 {
			return nil, none, &eventlog.CorruptionError{What: "header key", Err: fmt.Errorf("key %x", k)}
		}
		id := eventlog.ID(k[1:17])
		e, err := s.executionBelow(id, nil)
		if err != nil {
			return nil, none, err
		}
		if !e.deleted.Load() && (f.Agent == "" || e.hdr.Agent == f.Agent) && (f.Parent.IsZero() || e.hdr.Parent == f.Parent) &&
			(f.Caller.IsZero() || e.hdr.Caller == f.Caller) {
			e.mu.Lock()
			err = s.loadLocked(e)
			info := e.infoLocked()
			e.mu.Unlock()
			if err != nil {
				return nil, none, err
			}
			if f.Match(info) {
				out = append(out, info)
			}
		}
		if scanned++; len(out) == n || scanned == 16*n {
			return out, id, nil // the caller goes on after id
		}
	}
	if err := it.Error(); err != nil {
		return nil, none, fmt.Errorf("pebblestore: list: %w", err)
	}
	return out, none, nil
}

// Append implements eventlog.Log.
func (s *Store) Append(ctx context.Context, id eventlog.ID, expectedHead uint64, events ...eventlog.Event) (uint64, error) {
	return s.append(ctx, id, expectedHead, s.write, events, nil)
}

// AppendUnsynced implements eventlog.Log. Pebble's write-ahead log is
// ordered, so a later synced commit makes these events durable too.
func (s *Store) AppendUnsynced(ctx context.Context, id eventlog.ID, expectedHead uint64, events ...eventlog.Event) (uint64, error) {
	return s.append(ctx, id, expectedHead, pebble.NoSync, events, nil)
}

// append is Append, AppendUnsynced and Take: it writes events at
// expectedHead+1… and removes the inbox requests numbered take, in one
// batch committed with wo, under the execution's lock.
func (s *Store) append(ctx context.Context, id eventlog.ID, expectedHead uint64, wo *pebble.WriteOptions, events []eventlog.Event, take []uint64) (uint64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return 0, fmt.Errorf("%w: append of no events to %s", eventlog.ErrInvalid, id)
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	events = slices.Clone(events) // seqs and times are set on a copy, not the caller's slice
	records := make([][]byte, len(events))
	for i := range events {
		ev := events[i]
		want := expectedHead + uint64(i) + 1
		if ev.Seq != 0 && ev.Seq != want {
			return 0, fmt.Errorf("%w: execution %s: event %d of the append has seq %d, its position is %d",
				eventlog.ErrInvalid, id, i, ev.Seq, want)
		}
		switch ev.Kind() {
		case eventlog.KindExecutionCreated, eventlog.KindForkCreated:
			return 0, fmt.Errorf("%w: execution %s: %s is written by Create or Fork, not Append",
				eventlog.ErrInvalid, id, ev.Kind())
		case eventlog.KindChildEnded:
			return 0, fmt.Errorf("%w: execution %s: %s is an inbox request, never an event of a lineage",
				eventlog.ErrInvalid, id, ev.Kind())
		}
		// The index key holds the resource key's length in two bytes.
		if rb, ok := ev.Data.(*eventlog.ResourceBound); ok && len(rb.Key) > math.MaxUint16 {
			return 0, fmt.Errorf("%w: execution %s: resource key of %d bytes, at most %d",
				eventlog.ErrInvalid, id, len(rb.Key), math.MaxUint16)
		}
		ev.Seq = want
		if ev.Time.IsZero() {
			ev.Time = now
		}
		events[i] = ev
		if records[i], err = eventlog.AppendRecord(nil, id, ev); err != nil {
			return 0, fmt.Errorf("execution %s: %w", id, err)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.loadLocked(e); err != nil {
		return 0, err
	}
	if err := e.mu.lease.Admit(ctx, id, time.Now()); err != nil {
		return 0, fmt.Errorf("pebblestore: %w", err)
	}
	if e.mu.head != expectedHead {
		return 0, fmt.Errorf("%w: execution %s: head is %d, expected %d", eventlog.ErrConflict, id, e.mu.head, expectedHead)
	}
	if err := eventlog.CheckAfterEnd(id, e.mu.status.Status, e.mu.head, events); err != nil {
		return 0, err
	}
	if err := s.checkTakeLocked(e, take); err != nil {
		return 0, err
	}
	index, err := s.indexLocked(e)
	if err != nil {
		return 0, err
	}
	status := e.mu.status.Clone()
	b := s.db.NewBatch()
	defer b.Close()
	// A child's end locks its caller before the chunks (never after: an
	// append of the caller holds the caller's lock and waits for the
	// chunks' read lock behind a Sweep, which waits for this append).
	var woke *wakeCaller
	if !e.hdr.Caller.IsZero() && ends(e.mu.status, events) {
		if woke, err = s.wakeCallerLocked(b, e, events[len(events)-1].Time); err != nil {
			return 0, err
		}
		if woke != nil {
			defer woke.parent.mu.Unlock()
		}
	}
	s.chunks.RLock()
	defer s.chunks.RUnlock()
	written, err := s.chunkRecords(b, records)
	if err != nil {
		return 0, err
	}
	for i, ev := range events {
		_ = b.Set(eventKey(id, ev.Seq), records[i], nil)
		status.Apply(ev)
		changed, err := index.Apply(ev)
		if err != nil {
			e.mu.loaded = false // the index state may hold part of this append
			return 0, fmt.Errorf("execution %s: seq %d: %w", id, ev.Seq, err)
		}
		for _, st := range changed {
			v, err := encodeIndexValue(st)
			if err != nil {
				e.mu.loaded = false
				return 0, fmt.Errorf("pebblestore: encode index: %w", err)
			}
			_ = b.Set(indexKey(id, st.Key, st.Seq), v, nil)
		}
	}
	for _, n := range take {
		_ = b.Delete(requestKey(id, n), nil)
	}
	sv, err := encodeStateValue(status, e.mu.inbox.last, e.mu.lease.Epoch)
	if err != nil {
		e.mu.loaded = false
		return 0, fmt.Errorf("pebblestore: encode state: %w", err)
	}
	_ = b.Set(stateKey(id), sv, nil)
	if err := s.commit(b, wo); err != nil {
		e.mu.loaded = false
		if woke != nil {
			woke.parent.mu.loaded = false // whether the request landed is unknown
		}
		return 0, fmt.Errorf("pebblestore: execution %s: append: %w", id, err)
	}
	s.remember(written...)
	e.mu.head = expectedHead + uint64(len(events))
	e.mu.status = status
	e.syncSlotLocked()
	e.mu.inbox.remove(take)
	if woke != nil {
		woke.parent.mu.inbox.last = woke.n
		woke.parent.mu.inbox.pending = append(woke.parent.mu.inbox.pending, woke.n)
	}
	return e.mu.head, nil
}

// ends reports whether events, appended to an execution in state st, end
// it.
func ends(st eventlog.StatusState, events []eventlog.Event) bool {
	if st.Status.Terminal() {
		return false
	}
	st = st.Clone()
	for _, ev := range events {
		st.Apply(ev)
	}
	return st.Status.Terminal()
}

// wakeCaller is the child.ended request a child's terminal append writes
// into its caller's inbox: the caller, locked, and the request's number.
type wakeCaller struct {
	parent *execution
	n      uint64
}

// wakeCallerLocked adds to b the child.ended request of child e (whose
// lock is held) to its caller's inbox (DESIGN §15½.6), and returns the
// caller locked — the caller's lock is taken after the child's, always
// in that order (a caller is never its child's descendant) — with the
// request's number; the append's commit writes it. A caller that is
// deleted gets none (nil).
func (s *Store) wakeCallerLocked(b *pebble.Batch, e *execution, at time.Time) (*wakeCaller, error) {
	parent, err := s.execution(e.hdr.Caller)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: execution %s: its caller %s: %w", e.id, e.hdr.Caller, err)
	}
	req := eventlog.Event{Time: at, Data: &eventlog.ChildEnded{StepID: e.hdr.CallerStep}}
	// Checked before the number is known; encoded again below, bound to
	// the caller's inbox and its number.
	if _, err := eventlog.AppendRequest(nil, parent.id, 0, req); err != nil {
		return nil, fmt.Errorf("execution %s: child.ended: %w", e.id, err)
	}
	parent.mu.Lock()
	if err := s.loadLocked(parent); err != nil {
		parent.mu.Unlock()
		if errors.Is(err, eventlog.ErrNotFound) {
			return nil, nil // deleted
		}
		return nil, err
	}
	if err := s.loadInboxLocked(parent); err != nil {
		parent.mu.Unlock()
		return nil, err
	}
	n := parent.mu.inbox.last + 1
	rec, err := eventlog.AppendRequest(nil, parent.id, n, req)
	if err != nil {
		parent.mu.Unlock()
		return nil, fmt.Errorf("execution %s: child.ended: %w", e.id, err)
	}
	_ = b.Set(requestKey(parent.id, n), rec, nil)
	return &wakeCaller{parent: parent, n: n}, nil
}

// Fork implements eventlog.Log.
func (s *Store) Fork(ctx context.Context, parent eventlog.ID, at uint64, fc *eventlog.ForkCreated, t time.Time) (eventlog.ID, error) {
	if err := s.writable(); err != nil {
		return eventlog.ID{}, err
	}
	if fc == nil {
		fc = &eventlog.ForkCreated{}
	}
	if (!fc.Parent.IsZero() && fc.Parent != parent) || (fc.At != 0 && fc.At != at) {
		return eventlog.ID{}, fmt.Errorf("%w: fork.created names %s@%d, the fork is of %s@%d",
			eventlog.ErrInvalid, fc.Parent, fc.At, parent, at)
	}
	s.tree.RLock()
	defer s.tree.RUnlock()
	head, err := s.Head(ctx, parent)
	if err != nil {
		return eventlog.ID{}, err
	}
	if at == 0 || at > head {
		return eventlog.ID{}, fmt.Errorf("%w: fork of %s at seq %d: seqs run from 1 to %d",
			eventlog.ErrInvalid, parent, at, head)
	}
	if t.IsZero() {
		t = time.Now()
	}
	created := *fc
	created.Parent, created.At = parent, at
	ev := eventlog.Event{Seq: at + 1, Time: t, Data: &created}
	id := eventlog.NewID()
	rec, err := eventlog.AppendRecord(nil, id, ev)
	if err != nil {
		return eventlog.ID{}, err
	}

	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	p, err := s.execution(parent)
	if err != nil {
		return eventlog.ID{}, err
	}
	states, err := s.resourceStates(p, at)
	if err != nil {
		return eventlog.ID{}, err
	}
	changed, err := eventlog.NewIndexState(states).Apply(ev)
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("fork of %s at seq %d: %w", parent, at, err)
	}
	hdr, err := encodeValue(&header{Agent: p.hdr.Agent, Parent: parent, At: at, Created: nanos(t), Version: fc.Version})
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: encode header: %w", err)
	}
	var status eventlog.StatusState // a fork's status is its own: pending
	status.Apply(ev)
	sv, err := encodeStateValue(status, 0, 0) // and so is its inbox: empty, and it was never claimed
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: encode state: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(headerKey(id), hdr, nil)
	_ = b.Set(stateKey(id), sv, nil)
	_ = b.Set(eventKey(id, at+1), rec, nil)
	for _, st := range changed {
		v, err := encodeIndexValue(st)
		if err != nil {
			return eventlog.ID{}, fmt.Errorf("pebblestore: encode index: %w", err)
		}
		_ = b.Set(indexKey(id, st.Key, st.Seq), v, nil)
	}
	if err := s.commit(b, s.write); err != nil {
		return eventlog.ID{}, fmt.Errorf("pebblestore: fork of %s at seq %d: %w", parent, at, err)
	}
	return id, nil
}

// enterLineage reads id's head and enters the store for a read of its
// lineage up to that head; on success the caller must call s.leave.
func (s *Store) enterLineage(ctx context.Context, id eventlog.ID) (*execution, uint64, error) {
	head, err := s.Head(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, 0, err
	}
	e, err := s.execution(id)
	if err != nil {
		s.leave()
		return nil, 0, err
	}
	return e, head, nil
}

// Events implements eventlog.Log.
func (s *Store) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		e, head, err := s.enterLineage(ctx, id)
		if err != nil {
			yield(eventlog.Event{}, err)
			return
		}
		defer s.leave()
		next := max(from, 1)
		for _, seg := range e.lineage {
			hi := min(seg.hi, head)
			if next > hi {
				continue
			}
			if !s.scanSegment(ctx, seg.id, next, hi, yield) {
				return
			}
			next = hi + 1
		}
	}
}

// scanSegment yields the events lo..hi of execution id, checking that none
// is missing. It returns false when the caller should stop.
func (s *Store) scanSegment(ctx context.Context, id eventlog.ID, lo, hi uint64, yield func(eventlog.Event, error) bool) bool {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: eventKey(id, lo),
		UpperBound: eventKey(id, seqEnd(hi)),
	})
	if err != nil {
		return yield(eventlog.Event{}, s.readErr(id, "events", err))
	}
	defer it.Close()
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		if want&1023 == 0 {
			if err := ctx.Err(); err != nil {
				yield(eventlog.Event{}, err)
				return false
			}
		}
		k := it.Key()
		if len(k) != 25 || eventSeq(k) != want {
			yield(eventlog.Event{}, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")})
			return false
		}
		ev, err := s.decodeEvent(id, want, it.Value())
		if err != nil {
			yield(eventlog.Event{}, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: err})
			return false
		}
		if !yield(ev, nil) {
			return false
		}
		want++
	}
	if err := it.Error(); err != nil {
		return yield(eventlog.Event{}, s.readErr(id, "events", err))
	}
	if want <= hi {
		yield(eventlog.Event{}, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")})
		return false
	}
	return true
}

// VerifyPrefix implements eventlog.PrefixVerifier: it checks the records
// of id's lineage 1..at (eventlog.CheckRecord; no payload is decoded).
func (s *Store) VerifyPrefix(ctx context.Context, id eventlog.ID, at uint64) error {
	s.tree.RLock()
	defer s.tree.RUnlock()
	head, err := s.Head(ctx, id)
	if err != nil {
		return err
	}
	if at == 0 || at > head {
		return fmt.Errorf("%w: verify %s to seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, id, at, head)
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return err
	}
	if err := s.verifyPrefix(ctx, e, at); err != nil {
		return fmt.Errorf("verify %s to seq %d: %w", id, at, err)
	}
	return nil
}

// verifyPrefix checks the records of e's lineage up to seq at — every
// one present and whole where it belongs (eventlog.CheckRecord: header
// and checksum, which binds the execution and seq; no payload is decoded).
// Damage is a *eventlog.CorruptionError naming the execution and seq.
func (s *Store) verifyPrefix(ctx context.Context, e *execution, at uint64) error {
	next := uint64(1)
	for _, seg := range e.lineage {
		hi := min(seg.hi, at)
		if next > hi {
			continue
		}
		if err := s.verifySegment(ctx, seg.id, next, hi); err != nil {
			return err
		}
		next = hi + 1
	}
	return nil
}

// verifySegment is verifyPrefix's check of the own events lo..hi of id.
func (s *Store) verifySegment(ctx context.Context, id eventlog.ID, lo, hi uint64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: eventKey(id, lo),
		UpperBound: eventKey(id, seqEnd(hi)),
	})
	if err != nil {
		return s.readErr(id, "events", err)
	}
	defer it.Close()
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		if want&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := it.Key()
		if len(k) != 25 || eventSeq(k) != want {
			return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
		}
		rec, err := s.resolve(it.Value())
		if err == nil {
			err = eventlog.CheckRecord(id, want, rec)
		}
		if err != nil {
			return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: err}
		}
		want++
	}
	if err := it.Error(); err != nil {
		return s.readErr(id, "events", err)
	}
	if want <= hi {
		return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
	}
	return nil
}

// ResourceStates implements eventlog.Index.
func (s *Store) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	head, err := s.Head(ctx, id)
	if err != nil {
		return nil, err
	}
	if at == 0 || at > head {
		return nil, fmt.Errorf("%w: execution %s: seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, id, at, head)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return nil, err
	}
	return s.resourceStates(e, at)
}

// resourceStates reads the newest state at or before at of every resource
// of e's lineage. The segment holding at has an entry for every resource
// bound by then: a fork writes one for each inherited resource.
func (s *Store) resourceStates(e *execution, at uint64) ([]eventlog.ResourceState, error) {
	var seg segment
	for _, sg := range e.lineage {
		if sg.lo <= at && at <= sg.hi {
			seg = sg
		}
	}
	prefix := executionPrefix(tagIndex, seg.id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, s.readErr(seg.id, "index", err)
	}
	defer it.Close()
	var out []eventlog.ResourceState
	for ok := it.First(); ok; {
		key, _, valid := parseIndexKey(it.Key())
		if !valid {
			return nil, &eventlog.CorruptionError{Execution: seg.id, What: "index key", Err: fmt.Errorf("key %x", it.Key())}
		}
		kp := indexPrefix(seg.id, key)
		if it.SeekLT(indexKey(seg.id, key, seqEnd(at))) {
			if k, seq, valid := parseIndexKey(it.Key()); valid && k == key {
				st, err := decodeIndexValue(key, seq, it.Value())
				if err != nil {
					return nil, &eventlog.CorruptionError{Execution: seg.id, Seq: seq, What: "index entry of " + key, Err: err}
				}
				out = append(out, st)
			}
		}
		// Skip to the next resource key.
		ok = it.SeekGE(prefixEnd(kp))
	}
	if err := it.Error(); err != nil {
		return nil, s.readErr(seg.id, "index", err)
	}
	sortStates(out)
	return out, nil
}

// ResourceHistory implements eventlog.Index.
func (s *Store) ResourceHistory(ctx context.Context, id eventlog.ID, key string, after uint64) iter.Seq2[eventlog.ResourceState, error] {
	return func(yield func(eventlog.ResourceState, error) bool) {
		e, head, err := s.enterLineage(ctx, id)
		if err != nil {
			yield(eventlog.ResourceState{}, err)
			return
		}
		defer s.leave()
		for _, seg := range e.lineage {
			hi := min(seg.hi, head)
			lo := max(seg.lo, after+1)
			if lo > hi {
				continue
			}
			if !s.scanIndex(seg.id, key, lo, hi, yield) {
				return
			}
		}
	}
}

func (s *Store) scanIndex(id eventlog.ID, key string, lo, hi uint64, yield func(eventlog.ResourceState, error) bool) bool {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: indexKey(id, key, lo),
		UpperBound: indexKey(id, key, seqEnd(hi)),
	})
	if err != nil {
		return yield(eventlog.ResourceState{}, s.readErr(id, "index", err))
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k, seq, valid := parseIndexKey(it.Key())
		if !valid || k != key {
			yield(eventlog.ResourceState{}, &eventlog.CorruptionError{Execution: id, What: "index key", Err: fmt.Errorf("key %x", it.Key())})
			return false
		}
		st, err := decodeIndexValue(key, seq, it.Value())
		if err != nil {
			yield(eventlog.ResourceState{}, &eventlog.CorruptionError{Execution: id, Seq: seq, What: "index entry of " + key, Err: err})
			return false
		}
		if !yield(st, nil) {
			return false
		}
	}
	if err := it.Error(); err != nil {
		return yield(eventlog.ResourceState{}, s.readErr(id, "index", err))
	}
	return true
}

func sortStates(states []eventlog.ResourceState) {
	slices.SortFunc(states, func(a, b eventlog.ResourceState) int { return strings.Compare(a.Key, b.Key) })
}

// Dir returns the folder the log is in ("" for an in-memory log).
func (s *Store) Dir() string { return s.dir }

var _ io.Closer = (*Store)(nil)
