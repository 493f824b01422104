// Package blobtest is the conformance suite of blob.Store implementations
// (DESIGN §11, shared checkpoints): every implementation runs [Run] with a
// [Kit] that says how to make a store and how to damage a blob behind its
// back. It checks round trips (empty, small and multi-chunk blobs),
// idempotent and concurrent Put, refusal of content that does not hash to
// its name, Get of a corrupt blob failing with blob.ErrCorrupt naming the
// hash, Delete, List order and namespace isolation.
package blobtest
