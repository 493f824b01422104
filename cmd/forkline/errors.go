package main

import (
	"errors"
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// errInput classifies bad input: the command exits with status 2 and has
// written nothing.
var errInput = errors.New("bad input")

// inputError is bad input; its message is the whole line.
type inputError struct{ err error }

// Error returns the message.
func (e *inputError) Error() string { return e.err.Error() }

// Unwrap returns the error it wraps, so that errors.Is sees a sentinel
// such as eventlog.ErrNotFound.
func (e *inputError) Unwrap() error { return e.err }

// Is reports whether target is errInput.
func (e *inputError) Is(target error) bool { return target == errInput }

// inputErrorf returns bad input with a formatted message (%w wraps).
func inputErrorf(format string, args ...any) error {
	return &inputError{fmt.Errorf(format, args...)}
}

// exitStatus classifies err: bad input (ours, or one of the log's sentinels
// for it) is status 2, anything else 1. A damaged log is 1 even when what
// found the damage also calls it invalid (a replay that met a corrupt
// record): the input was fine, the log is not.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, eventlog.ErrCorrupt):
		return exitFailure
	case errors.Is(err, errInput),
		errors.Is(err, eventlog.ErrNotFound),
		errors.Is(err, eventlog.ErrInvalid),
		errors.Is(err, pebblestore.ErrNotALog),
		errors.Is(err, pebblestore.ErrLocked):
		return exitInput
	}
	return exitFailure
}
