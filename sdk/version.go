package sdk

import (
	"runtime/debug"

	"github.com/forkline/forkline/eventlog"
)

// ErrVersion is wrapped when Run is asked to run an execution of another
// code version (DESIGN §19, §21½.5): it is left for a worker of its own
// version, and nothing is appended. The error is a *VersionError naming
// both versions.
var ErrVersion = eventlog.ErrVersion

// VersionError is the error of a Run refused because the execution's
// recorded version (Version) is neither empty nor the kernel's (Worker).
// errors.Is(err, ErrVersion) holds for it.
type VersionError = eventlog.VersionError

// WithVersion sets the kernel's code version (DESIGN §19, §21½.5; default
// "", unversioned). Start and StartByName record it in
// execution.created's Version; Run and Serve run only executions of this
// version and unversioned ones, and leave the others to workers of
// theirs (Run returns ErrVersion). During a rolling deploy old and new
// workers share one store and each resumes only the executions its code
// recorded; an execution moves to new code by a fork with OnVersion.
// BuildVersion gives the binary's VCS revision for those who want it. A
// version longer than eventlog.MaxVersionLen bytes, not UTF-8 or holding
// a NUL byte is ErrInvalid.
func WithVersion(v string) Option {
	return func(k *Kernel) error {
		if err := eventlog.CheckVersionName(v); err != nil {
			return err
		}
		k.version = v
		return nil
	}
}

// BuildVersion returns the VCS revision the running binary was built
// from (debug.ReadBuildInfo's vcs.revision), or "" when the build
// recorded none (go run, go test, a build outside a repository or with
// -buildvcs=false). It is a value to pass to WithVersion, never used
// by default: the default version is "".
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return vcsRevision(info.Settings)
}

// vcsRevision returns the vcs.revision among a build's settings, or "".
func vcsRevision(settings []debug.BuildSetting) string {
	for _, s := range settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// Version returns the kernel's code version (WithVersion); "" for an
// unversioned kernel.
func (k *Kernel) Version() string { return k.version }

// OnVersion moves a fork onto code version v (DESIGN §19, §21½.5):
// recorded in fork.created's Version, so that only kernels of version v
// (or, for "", every kernel) run the fork. Without it a fork keeps its
// parent's version. With Strict, the new code's first difference from
// the recorded history is reported as ErrNonDeterministic. A version
// WithVersion would refuse is ErrInvalid.
func OnVersion(v string) ForkOption {
	return forkFunc(func(e *forkEdit) error {
		if err := eventlog.CheckVersionName(v); err != nil {
			return err
		}
		e.version = &v
		return nil
	})
}
