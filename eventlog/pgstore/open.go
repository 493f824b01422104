package pgstore

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the Postgres schema a store keeps its tables in unless
// WithSchema names another.
const DefaultSchema = "forkline"

// SchemaVersion is the version of the tables this build writes, kept in
// the schema_version table of the store's schema.
const SchemaVersion = 12

// ErrSchemaTooNew is returned by Open for a schema that a newer build of
// forkline migrated past SchemaVersion: this build would misread it.
var ErrSchemaTooNew = errors.New("pgstore: schema is newer than this build")

// IdleInTransactionTimeout is the idle_in_transaction_session_timeout
// Open sets on the store's connections, unless the URL sets that parameter
// itself. A process paused (SIGSTOP, a frozen VM) inside one of the
// store's short transactions keeps the execution's row locked, and every
// other worker's claim (FOR UPDATE SKIP LOCKED) would skip that execution
// until the process resumed, long after its lease expired. The server ends
// such a session after this long, releasing the lock, and the execution
// is taken over once its lease has expired. The store's transactions never
// wait on their caller between statements, so a live process is not
// affected.
const IdleInTransactionTimeout = 10 * time.Second

// idleParam is the Postgres setting IdleInTransactionTimeout sets.
const idleParam = "idle_in_transaction_session_timeout"

// Option configures Open.
type Option func(*options) error

type options struct {
	schema      string
	noSync      bool
	notifyEvery bool
	readOnly    bool
	noGroup     bool
}

// ErrNoSchema is returned by Open with ReadOnly when the database holds no
// forkline schema of that name: there is no forkline log to read.
var ErrNoSchema = errors.New("pgstore: no forkline log in the database")

// ErrSchemaTooOld is returned by Open with ReadOnly when the schema is at
// a version below SchemaVersion: a writer (an Open without ReadOnly)
// migrates it, a reader never does.
var ErrSchemaTooOld = errors.New("pgstore: schema is older than this build")

// ErrReadOnly is wrapped by the error of every write of a store opened
// with ReadOnly: the server refused it, and nothing was written.
var ErrReadOnly = errors.New("pgstore: log opened read-only")

// ReadOnly opens an existing store for reading only, as the inspection
// commands do: Open runs no DDL — it neither creates nor migrates the
// schema, so a role with only USAGE on the schema and SELECT on its tables
// may open it — and fails with ErrNoSchema when the schema does not exist
// and ErrSchemaTooOld when it is not at SchemaVersion yet. Its sessions
// are read-only (default_transaction_read_only), so every write is refused
// by the server and wraps ErrReadOnly.
func ReadOnly() Option { return func(o *options) error { o.readOnly = true; return nil } }

// WithoutSync makes every commit of the store asynchronous (the session
// setting synchronous_commit = off): a crash of the server may then lose
// acknowledged appends. For tests and benchmarks.
func WithoutSync() Option { return func(o *options) error { o.noSync = true; return nil } }

// NotifyEveryAppend makes every append NOTIFY (notify.go), not only those
// that end an execution, so that sdk's Watch in another process sees each
// event at once (DESIGN §15½.14) instead of at its poll. It costs
// throughput under concurrent appends: Postgres serializes the commits of
// notifying transactions in a database (measured here: 64 writers went
// from about 950 to about 400 appends/s; one writer did not change).
func NotifyEveryAppend() Option { return func(o *options) error { o.notifyEvery = true; return nil } }

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// WithSchema keeps the store's tables in the Postgres schema name (default
// DefaultSchema), which Open creates when it does not exist. Several stores
// may share one database in different schemas. name must be a lower-case
// SQL identifier: letters, digits and underscores, not starting with a
// digit, at most 63 bytes.
func WithSchema(name string) Option {
	return func(o *options) error {
		if !identifier.MatchString(name) {
			return fmt.Errorf("%w: schema name %q: want lower-case letters, digits and underscores, not starting with a digit, at most 63 bytes",
				eventlog.ErrInvalid, name)
		}
		o.schema = name
		return nil
	}
}

// Store is the Postgres implementation of eventlog.IndexedLog,
// eventlog.Leaser, eventlog.Inbox, eventlog.Claimer and eventlog.Notifier.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	q      queries

	// life guards the pool against Close, as in pebblestore: running
	// operations are counted, new ones fail with ErrClosed once closing.
	life struct {
		sync.Mutex
		closing bool
		active  sync.WaitGroup
	}
	// lineages caches execution headers, which never change.
	lineages sync.Map // eventlog.ID → *lineage
	// index caches, per execution, the index and status folds at one
	// head: the events up to a head never change, so the folds at (id,
	// head) are valid as long as the row's head is that head.
	index struct {
		sync.Mutex
		m map[eventlog.ID]*cachedIndex
	}
	// fast counts appends tried in one round trip (pipeline.go) and those
	// that wrote, for tests.
	fast struct{ tried, wrote atomic.Uint64 }
	// listen is the LISTEN connection behind Changes (notify.go);
	// notifyEvery makes every append NOTIFY (NotifyEveryAppend).
	listen      listener
	notifyEvery bool
	// group is the group commit of synced appends (group.go).
	group groupCommit
}

// cachedIndex is an execution's folds at one head: its index and its
// status as the row holds it (normalStatus).
type cachedIndex struct {
	head   uint64
	state  *eventlog.IndexState
	status eventlog.StatusState
}

var (
	_ eventlog.IndexedLog       = (*Store)(nil)
	_ eventlog.PrefixVerifier   = (*Store)(nil)
	_ eventlog.Leaser           = (*Store)(nil)
	_ eventlog.Inbox            = (*Store)(nil)
	_ eventlog.Claimer          = (*Store)(nil)
	_ eventlog.VersionClaimer   = (*Store)(nil)
	_ eventlog.VersionedClaimer = (*Store)(nil)
	_ eventlog.Notifier         = (*Store)(nil)
)

// Open connects to the Postgres database at url (a postgres:// or
// postgresql:// URL, or a key=value connection string, as pgx accepts),
// creates the store's schema and tables when they do not exist, and
// migrates them to SchemaVersion. Concurrent Opens of one schema (many
// hosts starting at once) are serialized by an advisory lock.
//
// A URL may name the schema with the query parameter forkline_schema
// (postgres://host/db?forkline_schema=team_a), which Open removes before
// connecting; WithSchema takes precedence over it.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{schema: DefaultSchema}
	url, schema, err := schemaParam(url)
	if err != nil {
		return nil, err
	}
	if schema != "" {
		opts = append([]Option{WithSchema(schema)}, opts...)
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil option", eventlog.ErrInvalid)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: pgstore: database URL: %w", eventlog.ErrInvalid, err)
	}
	if o.noSync {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	if o.readOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleParam]; !set {
		cfg.ConnConfig.RuntimeParams[idleParam] = strconv.FormatInt(IdleInTransactionTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	s := &Store{pool: pool, schema: o.schema, q: newQueries(o.schema), notifyEvery: o.notifyEvery}
	s.group.off = o.noGroup
	s.index.m = make(map[eventlog.ID]*cachedIndex)
	check := s.migrate
	if o.readOnly {
		check = s.checkSchema
	}
	if err := check(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// SchemaParam is the URL query parameter that names the store's schema.
const SchemaParam = "forkline_schema"

// schemaParam removes SchemaParam from a postgres:// URL and returns its
// value.
func schemaParam(raw string) (string, string, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return raw, "", nil
	}
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: pgstore: database URL: %w", eventlog.ErrInvalid, err)
	}
	q := u.Query()
	if !q.Has(SchemaParam) {
		return raw, "", nil
	}
	schema := q.Get(SchemaParam)
	if schema == "" {
		return "", "", fmt.Errorf("%w: pgstore: database URL: empty %s", eventlog.ErrInvalid, SchemaParam)
	}
	q.Del(SchemaParam)
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// Schema returns the name of the Postgres schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// migrations[i] takes the schema from version i to i+1.
var migrations = []func(schema string) []string{
	func(sc string) []string {
		return []string{
			// The header and state of each execution, its lease and the
			// inbox's newest request number: one row, locked by every write
			// to the execution.
			`CREATE TABLE ` + sc + `.executions (
				id             bytea PRIMARY KEY,
				agent          text NOT NULL,
				parent         bytea,
				fork_seq       bigint NOT NULL,
				caller         bytea,
				created_ns     bigint NOT NULL,
				idem_key       text UNIQUE,
				head           bigint NOT NULL,
				status         smallint NOT NULL,
				updated_ns     bigint NOT NULL,
				wake_ns        bigint NOT NULL,
				deadline_ns    bigint NOT NULL,
				dispatched     boolean NOT NULL,
				parked         boolean NOT NULL,
				approvals      text[] NOT NULL,
				lease_epoch    bigint NOT NULL,
				lease_owner    text NOT NULL,
				lease_expires_ns bigint NOT NULL,
				lease_released boolean NOT NULL,
				inbox_last     bigint NOT NULL
			)`,
			`CREATE INDEX executions_parent ON ` + sc + `.executions (parent)`,
			`CREATE INDEX executions_caller ON ` + sc + `.executions (caller)`,
			`CREATE INDEX executions_status ON ` + sc + `.executions (status, id)`,
			// An execution's own events: a fork's start at fork_seq+1.
			`CREATE TABLE ` + sc + `.events (
				execution bytea NOT NULL,
				seq       bigint NOT NULL,
				record    bytea NOT NULL,
				PRIMARY KEY (execution, seq)
			)`,
			// The checkpoint index: one row per resource per event that
			// changed it (eventlog.IndexState.Apply).
			`CREATE TABLE ` + sc + `.resource_states (
				execution      bytea NOT NULL,
				key            text NOT NULL,
				seq            bigint NOT NULL,
				generation     bigint NOT NULL,
				in_flight      text[] NOT NULL,
				coverage_reuse boolean NOT NULL,
				bound          bigint NOT NULL,
				latest_ref     text NOT NULL,
				latest_at      bigint NOT NULL,
				latest_gen     bigint NOT NULL,
				PRIMARY KEY (execution, key, seq)
			)`,
			// The inbox: requests not yet taken.
			`CREATE TABLE ` + sc + `.requests (
				execution bytea NOT NULL,
				n         bigint NOT NULL,
				record    bytea NOT NULL,
				PRIMARY KEY (execution, n)
			)`,
		}
	},
	// Version 2: tombstones (DESIGN §14). A deleted execution keeps its
	// row (a fork's lineage is built from its ancestors' rows) with the
	// prefix it keeps for its forks in deleted_kept; NULL: not deleted.
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.executions ADD COLUMN deleted_kept bigint`}
	},
	// Version 3: fork.diverged (DESIGN §12). An index row of a resource a
	// fork.diverged marked keeps that event's seq; 0: not diverged.
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.resource_states ADD COLUMN diverged bigint NOT NULL DEFAULT 0`}
	},
	// Version 4: Serve's backoff (DESIGN §15½.11, eventlog.RetryKeeper):
	// the error an execution's last run failed with and the time
	// ClaimRunnable skips it until (ns; 0: none).
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.executions ADD COLUMN last_error text NOT NULL DEFAULT '',
			ADD COLUMN retry_ns bigint NOT NULL DEFAULT 0`}
	},
	// Version 5, the limiter (DESIGN §17, issue 33): one row per key with
	// the times of the calls its window admitted (limiter.go). A step of
	// its own, whatever number it lands at: it only adds a table.
	migrateLimiter,
	// Version 6: children wake their caller (DESIGN §15½.6). A child's row
	// keeps the caller's StepID that started it (eventlog.WithCallerStep),
	// the StepID of the child.ended request its end writes; a request row
	// keeps its kind code, so ClaimRunnable tells a child.ended, which
	// makes only an execution parked for a child due, from the others.
	// Rows of earlier versions get '' and 0 (none of them is a
	// child.ended). await_owner is the owner a backed-off execution is
	// left to (eventlog.AwaitKeeper, DESIGN §15½.4): ClaimRunnable lets
	// that owner claim it before its retry_ns.
	func(sc string) []string {
		return []string{
			`ALTER TABLE ` + sc + `.executions ADD COLUMN caller_step text NOT NULL DEFAULT '',
				ADD COLUMN await_owner text NOT NULL DEFAULT ''`,
			`ALTER TABLE ` + sc + `.requests ADD COLUMN kind smallint NOT NULL DEFAULT 0`,
		}
	},
	// Version 7: quarantine (eventlog.Quarantiner): the error of the run
	// that found the execution's history damaged; '': not quarantined.
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.executions ADD COLUMN quarantine text NOT NULL DEFAULT ''`}
	},
	// Version 8: token usage (DESIGN §16, eventlog.Info.Tokens): the sums
	// of the own run's step.succeeded Tokens. Rows of earlier versions
	// get 0 and count only the events appended since.
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.executions ADD COLUMN tokens_in bigint NOT NULL DEFAULT 0,
			ADD COLUMN tokens_out bigint NOT NULL DEFAULT 0`}
	},
	// Version 9: the MessageIDs sent to each execution
	// (eventlog.MessageInbox), inserted in the transaction of the
	// message's request; the primary key makes a MessageID's check and
	// record one atomic step.
	func(sc string) []string {
		return []string{`CREATE TABLE ` + sc + `.message_ids (
			execution  bytea NOT NULL,
			message_id text NOT NULL,
			digest     bytea NOT NULL,
			PRIMARY KEY (execution, message_id)
		)`}
	},
	// Version 10: code versions (DESIGN §19, eventlog.Info.Version): the
	// execution.created or fork.created Version, which ClaimRunnableVersion
	// and ClaimVersion compare with the worker's. Rows of earlier versions
	// get '': they were started before versions existed and run anywhere.
	func(sc string) []string {
		return []string{`ALTER TABLE ` + sc + `.executions ADD COLUMN version text NOT NULL DEFAULT ''`}
	},
	// Version 11: schedules (DESIGN §19, §21½.14, schedule.go): a table
	// of their own, each with its last tick started.
	migrateSchedules,
	// Version 12: queues (DESIGN §19, §21½.13, queue.go): each row's
	// execution.created Queue and Priority, and a table of the queues'
	// records. Rows of earlier versions get '' and 0: in no queue.
	migrateQueues,
}

// migrateLimiter adds the limiter's table.
func migrateLimiter(sc string) []string {
	return []string{`CREATE TABLE ` + sc + `.limits (
		key   text PRIMARY KEY,
		takes timestamptz[] NOT NULL,
		ok    boolean NOT NULL
	)`}
}

// migrate creates the schema and brings its tables to SchemaVersion, in
// one transaction under an advisory lock on the schema's name.
func (s *Store) migrate(ctx context.Context) error {
	sc := s.q.schema
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "forkline schema "+s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+sc); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+sc+`.schema_version (version integer NOT NULL)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM `+sc+`.schema_version`).Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO `+sc+`.schema_version (version) VALUES (0)`); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: schema %s is at version %d, this build knows %d", ErrSchemaTooNew, s.schema, version, SchemaVersion)
		}
		for v := version; v < SchemaVersion; v++ {
			for _, stmt := range migrations[v](sc) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration to version %d: %w", v+1, err)
				}
			}
		}
		_, err = tx.Exec(ctx, `UPDATE `+sc+`.schema_version SET version = $1`, SchemaVersion)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrSchemaTooNew) {
			return err
		}
		return fmt.Errorf("pgstore: create or migrate schema %s: %w", s.schema, err)
	}
	return nil
}

// checkSchema checks, without DDL, that the store's schema exists and is
// at SchemaVersion (ReadOnly).
func (s *Store) checkSchema(ctx context.Context) error {
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.q.schema+".schema_version").Scan(&found)
	if err != nil {
		return fmt.Errorf("pgstore: read schema %s: %w", s.schema, err)
	}
	if !found {
		return fmt.Errorf("%w: schema %s has no forkline tables (a writer creates them)", ErrNoSchema, s.schema)
	}
	var version int
	err = s.pool.QueryRow(ctx, `SELECT version FROM `+s.q.schema+`.schema_version`).Scan(&version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: schema %s has no version yet (a writer is creating it)", ErrNoSchema, s.schema)
	case err != nil:
		return fmt.Errorf("pgstore: read the version of schema %s: %w", s.schema, err)
	case version > SchemaVersion:
		return fmt.Errorf("%w: schema %s is at version %d, this build knows %d", ErrSchemaTooNew, s.schema, version, SchemaVersion)
	case version < SchemaVersion:
		return fmt.Errorf("%w: schema %s is at version %d, this build reads %d: open it once for writing (forkline run or serve) to migrate it",
			ErrSchemaTooOld, s.schema, version, SchemaVersion)
	}
	return nil
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

// Close implements eventlog.Log: new operations fail with ErrClosed at
// once, running ones finish, and the connections are closed. Every append
// that returned is committed. Close again returns ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	if s.life.closing {
		s.life.Unlock()
		return eventlog.ErrClosed
	}
	s.life.closing = true
	s.life.Unlock()
	s.life.active.Wait()
	s.stopListening()
	s.pool.Close()
	return nil
}

// dbNow returns the database's clock: leases expire by it, so that hosts
// whose clocks disagree still agree on who owns what.
func dbNow(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (time.Time, error) {
	var t time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}
