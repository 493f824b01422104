//go:build !unix

package storefs

// Lock is a no-op on systems without flock(2): garbage collection must then
// not run while another process checkpoints into the same store.
func Lock(path string, exclusive bool) (unlock func(), err error) {
	return func() {}, nil
}
