// Package resource is the runtime side of forkline's resources (DESIGN §5):
// it creates, opens and checkpoints external state through drivers and
// builds the events that record it. The SDK decides when; this package
// does the how, so that another kernel can reuse it.
//
// # Drivers of any type
//
// A [driver.Driver] is generic in its handle and binding. [Erase] wraps one
// as a [Driver] so that one execution can hold resources of different
// drivers; bindings cross the wrapper as JSON, the form the log stores.
//
// # Checks
//
// [Match] refuses a driver whose DriverID or Configuration differ from the
// recorded binding ([ErrMismatch]); [Bind] refuses configuration that carries
// credentials (driver.ErrCredentials) and bindings that are not JSON
// ([ErrBadBinding]); [Capture] turns a failing, panicking or empty-ref
// checkpoint into a resource.capture_failed event instead of an error, so a
// failed capture never changes the outcome of the call it follows. A driver
// whose Create or Open panics returns an error wrapping [ErrDriverPanic]
// instead: the handler decides what to do with it.
package resource
