package storetest

import (
	"context"
	"iter"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// T is what the checks that take it need of a test: a *testing.T, or a
// recorder that a test of the kit itself passes to show that a check
// reports a broken store.
type T interface {
	rapid.TB
	Context() context.Context
}

// fataler is what collectAll needs of a test: a *testing.T, a *rapid.T or a T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// collectAll reads seq to its end: the values, and the error, which must
// come last and at most once.
func collectAll[V any](t fataler, seq iter.Seq2[V, error]) ([]V, error) {
	t.Helper()
	var out []V
	var err error
	for v, e := range seq {
		if err != nil {
			t.Fatalf("a value after the error %v", err)
		}
		if e != nil {
			err = e
			continue
		}
		out = append(out, v)
	}
	return out, err
}

// diff describes how got differs from want ("" when equal); nil and empty
// slices are equal.
func diff(want, got any) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}
