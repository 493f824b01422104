package proptest_test

import (
	"context"
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/proptest"
	"github.com/forkline/forkline/sdk"
)

// reporter stands in for the *testing.T (or *rapid.T) of a real test.
type reporter struct{ failed bool }

func (r *reporter) Helper() {}
func (r *reporter) Errorf(format string, args ...any) {
	r.failed = true
	fmt.Printf(format+"\n", args...)
}
func (r *reporter) Fatalf(format string, args ...any) {
	r.failed = true
	fmt.Printf(format+"\n", args...)
}

// A user checks their own agent: CheckAgent runs it, kills and resumes it
// at every event, forks it at every event and runs the forks, under
// sdk.Strict. In a test, pass the test's t:
//
//	func TestGreeter(t *testing.T) {
//		proptest.CheckAgent(t, newKernel, "greeter", "world")
//	}
func ExampleCheckAgent() {
	newKernel := func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		k, err := sdk.New(log, opts...)
		if err != nil {
			return nil, err
		}
		_, err = sdk.Register(k, "greeter", func(ctx context.Context, name string) (string, error) {
			// The greeting is drawn in a step: recorded once, replayed after.
			hello, err := sdk.Step(ctx, "pick greeting", func(context.Context) (string, error) { return "Hello", nil })
			if err != nil {
				return "", err
			}
			return hello + ", " + name, nil
		})
		return k, err
	}
	t := &reporter{}
	proptest.CheckAgent(t, newKernel, "greeter", "world")
	fmt.Println("failed:", t.failed)
	// Output: failed: false
}
