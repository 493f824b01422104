// Package drivertest is the conformance kit for forkline drivers: [Run]
// checks that a [driver.Driver] keeps the contract the kernel relies on when
// it binds, reopens, checkpoints and restores resources in forks.
//
// # Using it
//
// A driver author supplies a constructor for a fresh driver (with its own
// store, typically under t.TempDir) and a [Harness]: how to change the
// resource through a handle, how to observe its state, and how to delete a
// checkpoint from the driver's store:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t testing.TB) driver.Driver[*dirfs.Workspace, dirfs.Binding] {
//			return dirfs.New(dirfs.Config{Store: t.TempDir()})
//		}, drivertest.Harness[*dirfs.Workspace, dirfs.Binding]{
//			Mutate:   func(t testing.TB, w *dirfs.Workspace, step int) { … },
//			Snapshot: func(t testing.TB, w *dirfs.Workspace) any { … },
//			DeleteCheckpoint: func(t testing.TB, d driver.Driver[*dirfs.Workspace, dirfs.Binding], ref string) { … },
//		})
//	}
//
// # What it checks
//
// Each check is a subtest of Run:
//
//   - DriverID: non-empty and stable, across calls and driver values.
//   - Configuration: JSON-encodable, stable, and free of credentials by
//     [driver.EncodeConfiguration].
//   - CreateInitial: Create("") works; two initial resources start equal and
//     are isolated from each other, with distinct bindings.
//   - RestoreExact: Create(ref) restores exactly the state captured, of a
//     fresh resource and of a changed one, also after the source handle was
//     closed.
//   - RefImmutable: later changes to the source handle, or to a resource
//     restored from the ref, never change what the ref restores.
//   - HandleUsableAfterCheckpoint: Checkpoint leaves the state as it was and
//     the handle usable for further changes and checkpoints.
//   - OpenSameResource: Open(binding) reaches the same resource; changes
//     through either handle are visible through the other.
//   - BindingJSON: the binding survives a JSON round trip (the kernel stores
//     it as JSON) and still opens the same resource.
//   - IsolatedRestores: two resources created from one ref are independent
//     of each other and of the source.
//   - MissingRef: a ref that never existed, or is malformed, yields an error
//     wrapping [driver.ErrCheckpointUnavailable].
//   - DeletedRef: a deleted checkpoint yields the same error (skipped when
//     Harness.DeleteCheckpoint is nil).
//
// The kit's own tests run every check against a correct in-memory driver and
// against deliberately broken ones, to show each check can fail.
package drivertest
