//go:build !unix

package benchmarks

import (
	"errors"
	"time"
)

// processCPU reports that the process's CPU time is not read on this
// system: the scenarios timed by it (2t, 2u) need getrusage.
func processCPU() (time.Duration, error) {
	return 0, errors.New("benchmarks: the process's CPU time is read with getrusage, which this system lacks")
}
