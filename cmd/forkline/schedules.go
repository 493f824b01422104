package main

import (
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// scheduleRow is one schedule as `forkline schedules` prints it.
type scheduleRow struct {
	Name    string `json:"name"`
	Agent   string `json:"agent"`
	Spec    string `json:"spec"`
	CatchUp int    `json:"catch_up"`
	// LastTick and NextTick are null for none (a schedule no Serve has
	// ticked yet; one whose spec has no next time).
	LastTick *time.Time `json:"last_tick"`
	NextTick *time.Time `json:"next_tick"`
}

// orNil is t, or nil for the zero time.
func orNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// tickText is a tick in the table: its time, or "-" for none.
func tickText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timeText(*t)
}

// cmdSchedules lists the log's schedules (DESIGN §19): name, agent, spec,
// the last tick started and the next tick a Serve starts.
func cmdSchedules(e *env) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		list, err := k.Schedules(e.ctx)
		if err != nil {
			return err
		}
		rows := make([]scheduleRow, 0, len(list))
		for _, sc := range list {
			rows = append(rows, scheduleRow{Name: sc.Name, Agent: sc.Agent, Spec: sc.Spec, CatchUp: sc.CatchUp,
				LastTick: orNil(sc.LastTick), NextTick: orNil(sc.NextTick)})
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"schedules": rows})
		}
		if len(rows) == 0 {
			fmt.Fprintf(e.stdout, "no schedule in %s\n", e.opts.where())
			return nil
		}
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "NAME\tAGENT\tSPEC\tLAST TICK\tNEXT TICK")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(r.Name), r.Agent, oneLine(r.Spec), tickText(r.LastTick), tickText(r.NextTick))
		}
		return tw.Flush()
	})
}

// cmdUnschedule removes the schedule name.
func cmdUnschedule(e *env, name string) error {
	return withLog(e, func(s logStore) error {
		var sch eventlog.Scheduler
		if !eventlog.As(s, &sch) {
			return inputErrorf("unschedule: this log keeps no schedules")
		}
		if err := sch.DeleteSchedule(e.ctx, name); err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"unscheduled": name})
		}
		fmt.Fprintf(e.stdout, "removed schedule %q; no Serve starts its ticks any more\n", name)
		return nil
	})
}
