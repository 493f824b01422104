// Package storetest is a conformance kit for implementations of the
// eventlog interfaces, as driver/drivertest is for drivers: a store author
// calls its functions from a test with a constructor of fresh stores, and
// every store in the tree passes the same checks (DESIGN §11).
//
// It checks leases today (Leaser: claim, renewal, release, expiry,
// takeover, and the fencing of appends by epoch); the checks of the Log and
// Index contracts live beside the Pebble store and move here with the
// second store.
package storetest
