//go:build !unix

package pebblestore

import "io"

// sharedLock takes no lock where fcntl locks are not available: a read-only
// store then does not see a writer of another process.
func sharedLock(string) (io.Closer, error) { return io.NopCloser(nil), nil }
