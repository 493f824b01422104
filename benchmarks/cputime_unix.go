//go:build unix

package benchmarks

import (
	"fmt"
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used so far, user and
// system, on every thread (the garbage collector's among them).
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("benchmarks: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
