// Package storetest is a conformance kit for implementations of the
// eventlog interfaces, as driver/drivertest is for drivers: a store author
// calls its functions from a test with a constructor of fresh stores, and
// every store in the tree passes the same checks (DESIGN §11).
//
// TestStore runs every check; each also runs alone: TestLeaser (claim,
// renewal, release, expiry, takeover, the fencing of appends by epoch),
// TestCreateKeys (idempotency keys of Create), TestList (List's filters
// and paging, Create's Caller), TestInbox (Request, Requests, Take),
// TestLimiter (TakeLimit's sliding windows, keys, expiry and concurrent
// takes), TestChildEnded, TestRetryKeeper and TestQuarantiner (Serve's backoff note and
// quarantine, and ClaimRunnable skipping them). TestTamper (records
// swapped, moved from another execution, deleted or flipped behind the
// store's back read as corruption, and Fork refuses them) needs a
// Tamperer into the store's raw records, so it is not in TestStore.
// They check what a store writes — lineages, heads, listings, pending
// requests — not only what a call returns.
//
// TestLineage (a rapid model of random appends, forks and forks of forks;
// every lineage, Head, Info, List and index answer against the model and
// the folds), TestConcurrency (racing and retrying writers under
// expectedHead) and TestClose (Close during appends, ErrClosed after)
// take a T — a *testing.T, or a recorder — and one store, so that the
// kit's own tests show each failing on a store that breaks one rule.
// Checks that need a reopened store (request numbers surviving a
// restart, durability) are the store's own.
package storetest
