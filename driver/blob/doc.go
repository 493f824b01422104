// Package blob is a content-addressed store of immutable byte strings,
// named by their SHA-256 (DESIGN §11, shared checkpoints). Drivers keep
// checkpoint contents in one, so that a checkpoint captured on one host
// restores on another that reaches the same store.
//
// # The interface
//
// A [Store] puts, gets, tests, deletes and lists blobs by [Hash]. Put is
// idempotent and checks that what it read hashes to the name it was given,
// storing nothing otherwise. Get returns a reader that checks the content
// against its name: a blob whose bytes do not match (a corrupt file, a
// damaged row) ends with an error wrapping [ErrCorrupt] that names the
// hash, instead of io.EOF. A caller that acts only on a read that reached
// io.EOF (as [ReadAll] does) therefore never acts on wrong data.
//
// # Namespaces
//
// One Store value is one namespace: the blobs of one log. [Dir] is
// namespaced by its directory; pgblob by a namespace name inside its
// table. Collecting unreferenced blobs (dirfs.Driver.GC) reads what one
// log references, so a namespace must not be shared by two logs.
//
// # Implementations
//
//   - [Dir], the default: files under a directory, laid out as
//     blobs/<2 hex>/<64 hex>, with temporary files in tmp/ — the layout
//     driver/dirfs has always used inside its store, so that a dirfs store
//     is a Dir of its own blobs.
//   - pgblob (driver/blob/pgblob): a table in a Postgres schema, for hosts
//     that share a Postgres log.
//
// blobtest is the conformance suite both pass.
package blob
