// Package storetest is a conformance kit for implementations of the
// eventlog interfaces, as driver/drivertest is for drivers: a store author
// calls its functions from a test with a constructor of fresh stores, and
// every store in the tree passes the same checks (DESIGN §11).
//
// TestStore runs every check; each also runs alone: TestLeaser (claim,
// renewal, release, expiry, takeover, the fencing of appends by epoch),
// TestCreateKeys (idempotency keys of Create), TestList (List's filters
// and paging, Create's Caller) and TestInbox (Request, Requests, Take).
// They check what a store writes — lineages, heads, listings, pending
// requests — not only what a call returns. Checks that need a reopened
// store (request numbers surviving a restart) are the store's own. The
// other checks of the Log and Index contracts live beside the Pebble store
// and move here with the second store.
package storetest
