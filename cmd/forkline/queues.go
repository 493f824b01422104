package main

import (
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// queueRow is one queue as `forkline queues` prints it.
type queueRow struct {
	Name        string `json:"name"`
	Declared    bool   `json:"declared"`
	Concurrency int    `json:"concurrency"`
	Rate        int    `json:"rate"`
	Per         string `json:"per"`
	Priority    bool   `json:"priority"`
	Waiting     int    `json:"waiting"`
	Running     int    `json:"running"`
}

// cmdQueues lists the log's queues (DESIGN §19): each one's concurrency
// and rate, whether it orders by priority, its depth (executions waiting:
// not ended and holding no slot) and how many run (hold a slot).
func cmdQueues(e *env) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		list, err := k.Queues(e.ctx)
		if err != nil {
			return err
		}
		rows := make([]queueRow, 0, len(list))
		for _, q := range list {
			r := queueRow{Name: q.Name, Declared: q.Declared, Concurrency: q.Concurrency, Rate: q.Rate,
				Priority: q.Priority, Waiting: q.Waiting, Running: q.Running}
			if q.Rate > 0 {
				r.Per = q.Per.String()
			}
			rows = append(rows, r)
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"queues": rows})
		}
		if len(rows) == 0 {
			fmt.Fprintf(e.stdout, "no queue in %s\n", e.opts.where())
			return nil
		}
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "QUEUE\tCONCURRENCY\tRATE\tPRIORITY\tWAITING\tRUNNING")
		for _, r := range rows {
			conc, rate, prio := "-", "-", "no"
			switch {
			case !r.Declared:
				conc = "undeclared"
			case r.Concurrency > 0:
				conc = fmt.Sprint(r.Concurrency)
			}
			if r.Rate > 0 {
				rate = fmt.Sprintf("%d/%s", r.Rate, r.Per)
			}
			if r.Priority {
				prio = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", oneLine(r.Name), conc, rate, prio, r.Waiting, r.Running)
		}
		return tw.Flush()
	})
}
