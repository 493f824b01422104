package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/sdk"
)

// ExampleRetry retries a tool whose first attempt fails: the failed
// attempt is recorded as step.failed with RetryAt (the backoff chosen for
// it), the second attempt runs after it, and its result is the call's.
// Then a durable Sleep records timer.started and timer.fired.
func ExampleRetry() {
	ctx := context.Background()
	k, _ := sdk.Open("") // an in-memory log
	defer k.Close()
	attempts := 0
	fetch := sdk.DefineTool("fetch", func(ctx context.Context, url string) (string, error) {
		if attempts++; attempts == 1 {
			return "", errors.New("503 Service Unavailable")
		}
		return "the page at " + url, nil
	}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 3, Initial: time.Millisecond}))
	_, _ = sdk.Register(k, "fetcher", func(ctx context.Context, url string) (string, error) {
		page, err := fetch.Call(ctx, url)
		if err != nil {
			return "", err
		}
		if err := sdk.Sleep(ctx, time.Millisecond); err != nil {
			return "", err
		}
		return page, nil
	})
	id, _ := k.Start(ctx, "fetcher", "example.com")
	res, err := k.Run(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Seq, rdescribe(ev))
	}
	fmt.Println(string(res.Output))
	// Output:
	// 1 created fetcher
	// 2 dispatch 1
	// 3 started tool fetch
	// 4 retrying 503 Service Unavailable
	// 5 started tool fetch attempt=2
	// 6 succeeded
	// 7 timer.started
	// 8 timer.fired
	// 9 completed
	// "the page at example.com"
}
