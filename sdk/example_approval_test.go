package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// ExampleKernel_Approve asks a person before a payment (DESIGN §12): the
// gate's rule answers approve, the dispatch parks waiting, Approve records
// the decision, and the next Run pays.
func ExampleKernel_Approve() {
	ctx := context.Background()
	rules, _ := policy.ParseRules("approve tool:pay payments need a person")
	k, _ := sdk.Open("", sdk.WithGate(rules.Gate()), sdk.ParkAfter(time.Millisecond))
	defer k.Close()
	pay := sdk.DefineTool("pay", func(_ context.Context, cents int) (string, error) {
		return fmt.Sprintf("paid %d cents", cents), nil
	}, sdk.AtMostOnce())
	_, _ = sdk.Register(k, "payer", func(ctx context.Context, cents int) (string, error) {
		return pay.Call(ctx, cents)
	})

	id, _ := k.Start(ctx, "payer", 250)
	_, err := k.Run(ctx, id)
	fmt.Println("waiting:", errors.Is(err, sdk.ErrWaiting))
	waiting, _ := k.AwaitedApprovals(ctx, id)
	for _, a := range waiting {
		fmt.Printf("%s %s %s: %s\n", a.StepKind, a.Target, a.Args, a.Reason)
		if err := k.Approve(ctx, id, a.StepID, sdk.Note("ok")); err != nil {
			fmt.Println(err)
		}
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	var out string
	_ = res.Decode(&out)
	fmt.Println(out)
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Seq, describe(ev))
	}
	// Output:
	// waiting: true
	// tool pay 250: payments need a person
	// paid 250 cents
	// 1 created payer
	// 2 dispatch 1
	// 3 approval.requested
	// 4 dispatch.parked
	// 5 approval.granted
	// 6 dispatch 2
	// 7 started tool pay at_most_once
	// 8 succeeded
	// 9 completed
}
