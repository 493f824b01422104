package coverage

// chunkBits sets the size of a chunk: 4096 entries.
const chunkBits = 12

// chunked is an append-only list kept in chunks of 1<<chunkBits entries
// (the first one grows like a slice up to that size), so that growing a
// list of millions never copies what it already holds.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

func (c *chunked[T]) len() int { return c.n }

func (c *chunked[T]) at(i int) T { return c.chunks[i>>chunkBits][i&(1<<chunkBits-1)] }

func (c *chunked[T]) set(i int, v T) { c.chunks[i>>chunkBits][i&(1<<chunkBits-1)] = v }

func (c *chunked[T]) append(v T) {
	k := len(c.chunks) - 1
	if k < 0 || len(c.chunks[k]) == 1<<chunkBits {
		var next []T
		if k >= 0 {
			next = make([]T, 0, 1<<chunkBits)
		}
		c.chunks = append(c.chunks, next)
		k++
	}
	c.chunks[k] = append(c.chunks[k], v)
	c.n++
}
