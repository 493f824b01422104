package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrVersion is wrapped when an execution is claimed or run by a worker of
// another code version (DESIGN §19, §21½.5): it is left for a worker of
// its own version. A *VersionError names both versions.
var ErrVersion = errors.New("eventlog: execution is of another code version")

// VersionError is the error of a claim or a run refused because the
// execution's recorded version is neither empty nor the worker's.
type VersionError struct {
	ID      ID     // the execution
	Version string // the execution's recorded version (Info.Version)
	Worker  string // the version of the worker that tried to claim or run it
}

// Error implements error.
func (e *VersionError) Error() string {
	w := fmt.Sprintf("version %q", e.Worker)
	if e.Worker == "" {
		w = "no version (it runs only unversioned executions)"
	}
	return fmt.Sprintf("eventlog: execution %s is of code version %q; this worker has %s", e.ID, e.Version, w)
}

// Is reports whether target is ErrVersion.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// RunsOn reports whether an execution whose recorded version is version
// runs on a worker of version worker (DESIGN §21½.5): an unversioned
// execution runs on any worker, a versioned one only on a worker of its
// version.
func RunsOn(version, worker string) bool { return version == "" || version == worker }

// CheckVersion returns nil when info's execution runs on a worker of
// version worker (RunsOn), and a *VersionError otherwise.
func CheckVersion(info Info, worker string) error {
	if RunsOn(info.Version, worker) {
		return nil
	}
	return &VersionError{ID: info.ID, Version: info.Version, Worker: worker}
}

// VersionClaimer is a Leaser whose claims can be limited to the
// executions a worker of one code version runs (DESIGN §19): the version
// is checked under the lock the claim takes, so no claim of an execution
// of another version ever succeeds. Both stores of this module implement
// it; storetest's TestVersions checks it.
type VersionClaimer interface {
	Leaser

	// ClaimVersion is Claim for a worker of version worker: when id's
	// recorded version (Info.Version) is neither "" nor worker, it fails
	// with a *VersionError and writes nothing (no epoch is spent).
	ClaimVersion(ctx context.Context, id ID, owner string, ttl time.Duration, worker string) (Lease, error)
}

// VersionedClaimer is a Claimer whose bulk claim finds only the
// executions a worker of one code version runs (DESIGN §19): on
// Postgres, a condition of the claim's query. storetest's TestVersions
// checks it.
type VersionedClaimer interface {
	Claimer

	// ClaimRunnableVersion is ClaimRunnable for a worker of version
	// worker: it claims only executions whose recorded version is "" or
	// worker.
	ClaimRunnableVersion(ctx context.Context, owner string, ttl time.Duration, agents []string, worker string, n int, now time.Time) ([]Lease, error)
}

// MaxVersionLen bounds a code version's length in bytes.
const MaxVersionLen = 256

// CheckVersionName refuses a code version both stores cannot keep and
// compare alike: longer than MaxVersionLen bytes, not UTF-8, or holding a
// NUL byte; the error wraps ErrInvalid. "" (unversioned) is valid.
func CheckVersionName(v string) error {
	switch {
	case len(v) > MaxVersionLen:
		return fmt.Errorf("%w: code version of %d bytes, more than %d", ErrInvalid, len(v), MaxVersionLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: code version %q is not UTF-8", ErrInvalid, v)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: code version %q has a NUL byte", ErrInvalid, v)
	}
	return nil
}
