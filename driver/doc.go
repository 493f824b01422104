// Package driver defines how forkline reaches external state: the [Driver]
// interface that a resource implementation satisfies, the errors a driver
// reports, and the checks the kernel applies to a driver's configuration.
//
// # Drivers
//
// A resource is external state — a workspace directory, a database, a
// sandbox — that an execution changes through its tools and steps. forkline
// records which resource an execution bound and which checkpoints were taken;
// the driver does the rest:
//
//   - [Driver.Create] makes a new, isolated resource, either from the initial
//     environment (from == "") or from a checkpoint ref, and returns a handle
//     and a binding. The kernel stores the binding as JSON.
//   - [Driver.Open] returns a handle for a resource created earlier, from its
//     binding. A later dispatch of the same execution uses it.
//   - [Driver.Checkpoint] captures the resource's current state and returns an
//     immutable ref. The handle stays usable; later changes to it never change
//     what the ref restores.
//
// A driver stores the captured contents itself; the kernel only keeps refs.
// When Create is asked for a checkpoint that expired, was deleted, or never
// existed, the driver returns an error that wraps [ErrCheckpointUnavailable];
// the kernel then fails the forked execution with code
// checkpoint_unavailable.
//
// # Identity and configuration
//
// [Driver.DriverID] names the implementation ("forkline.dirfs.v1") and
// [Driver.Configuration] returns its JSON settings. The kernel records both
// when a resource is bound and refuses to open or restore the resource with a
// driver whose ID or configuration differ: a checkpoint made by one driver is
// not restored by another. Configuration is stored in the event log, so it
// must not carry credentials; [EncodeConfiguration] encodes it and refuses
// keys that look like credentials with [ErrCredentials].
//
// # Many hosts (DESIGN §11)
//
// A recorded Configuration names what makes two resources interchangeable
// (a format version, options that change behaviour), never where a store
// lives, so that a moved data folder or another host opens the same
// bindings. A driver whose older versions recorded more (a store path)
// implements [ConfigurationReader] to read that form; [DropKeys] does the
// common case.
//
// A driver whose bindings open from any host (a remote sandbox) implements
// [Portable]. Any other binding is opened only by the owner that made it,
// while no other owner held the execution since; a new owner binds anew
// from the checkpoint that covers the head. Checkpoint contents that must
// restore on another host go to a shared driver/blob store
// (driver/blob/pgblob).
//
// # Coverage reuse
//
// By default any live step ends a resource's coverage, because the driver
// cannot know what a step changed. A driver whose state only changes through
// tools and steps that declare it may implement [CoverageReuser]; see
// [CoverageReuse].
//
// # Comparing checkpoints
//
// A driver may implement [Differ]: Diff(ctx, refA, refB) returns a
// [Difference], the things added, removed or changed between two of its
// checkpoints (files with a unified diff in dirfs; tables and rows in
// sqlitedb). `forkline diff` and the web page's diff show it; proptest
// compares a fork's state with its parent's through it.
//
// # Implementations
//
// Real drivers live in subpackages: driver/dirfs (a workspace directory with
// content-addressed, incremental snapshots) and driver/sqlitedb (an SQLite
// database file). driver/drivertest is the conformance kit every driver
// should pass.
package driver
