package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
)

// LiveSet is what the kept (not deleted) executions of a log can still
// select or open through one driver (DESIGN §14).
type LiveSet struct {
	// Refs are the checkpoints a kept lineage names: captured in it,
	// selected by a fork.created in it, or bound from by a resource.bound
	// in it. A fork point anywhere in a kept lineage can pick no other.
	Refs []string
	// Bindings are the resources a kept execution bound in its own events
	// (after its fork point): the ones its later runs open. A fork never
	// opens its parent's resources — it binds anew from a checkpoint — so
	// the bindings of a deleted parent are not live however many forks it
	// has.
	Bindings []json.RawMessage
}

// Live folds every kept execution's lineage and returns, per DriverID,
// what the log can still select or open. It reads every lineage in full:
// it is for garbage collection, not for a hot path.
func (k *Kernel) Live(ctx context.Context) (map[string]*LiveSet, error) {
	type set struct {
		refs     map[string]bool
		bindings map[string]json.RawMessage
	}
	sets := map[string]*set{}
	get := func(driverID string) *set {
		s, ok := sets[driverID]
		if !ok {
			s = &set{refs: map[string]bool{}, bindings: map[string]json.RawMessage{}}
			sets[driverID] = s
		}
		return s
	}
	for info, err := range k.log.List(ctx, Filter{}) {
		if err != nil {
			return nil, fmt.Errorf("sdk: live set: %w", err)
		}
		drivers := map[string]string{} // resource key → DriverID, as bound in the lineage
		for ev, err := range k.log.Events(ctx, info.ID, 1) {
			if err != nil {
				return nil, fmt.Errorf("sdk: live set: %s: %w", info.ID, err)
			}
			switch p := ev.Data.(type) {
			case *eventlog.ResourceBound:
				drivers[p.Key] = p.DriverID
				s := get(p.DriverID)
				if p.From != "" {
					s.refs[p.From] = true
				}
				if ev.Seq > info.ForkSeq {
					s.bindings[string(p.Binding)] = p.Binding
				}
			case *eventlog.ResourceCaptured:
				get(drivers[p.Key]).refs[p.Ref] = true
			case *eventlog.ForkCreated:
				for _, sel := range p.Selections {
					if sel.Ref != "" {
						get(drivers[sel.Key]).refs[sel.Ref] = true
					}
				}
			}
		}
	}
	out := make(map[string]*LiveSet, len(sets))
	for id, s := range sets {
		ls := &LiveSet{}
		for r := range s.refs {
			ls.Refs = append(ls.Refs, r)
		}
		slices.Sort(ls.Refs)
		keys := make([]string, 0, len(s.bindings))
		for b := range s.bindings {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		for _, b := range keys {
			ls.Bindings = append(ls.Bindings, s.bindings[b])
		}
		out[id] = ls
	}
	return out, nil
}

// CollectingDriver is a driver whose store can be garbage-collected.
type CollectingDriver[H, B any] interface {
	driver.Driver[H, B]
	driver.Collector[B]
}

// Collect drops from d's store every checkpoint and resource that no kept
// execution of k's log can select or open (Kernel.Live for d's DriverID),
// sparing what is younger than grace: a capture or a binding the log has
// not recorded yet. Run it after Delete or forkline gc; it never touches
// what a kept execution needs. d's store must serve k's log alone: the
// checkpoints of another log sharing it would look unreferenced. A binding
// recorded in the log that does not decode into B is an error, and nothing
// is removed.
func Collect[H, B any](ctx context.Context, k *Kernel, d CollectingDriver[H, B], grace time.Duration) (driver.Collected, error) {
	if grace < 0 {
		return driver.Collected{}, fmt.Errorf("%w: negative grace period %v", ErrInvalid, grace)
	}
	live, err := k.Live(ctx)
	if err != nil {
		return driver.Collected{}, err
	}
	ls := live[d.DriverID()]
	if ls == nil {
		ls = &LiveSet{}
	}
	bindings := make([]B, 0, len(ls.Bindings))
	for _, raw := range ls.Bindings {
		var b B
		if err := json.Unmarshal(raw, &b); err != nil {
			return driver.Collected{}, fmt.Errorf("sdk: collect %s: recorded binding %s: %w", d.DriverID(), raw, err)
		}
		bindings = append(bindings, b)
	}
	return d.Live(ctx, ls.Refs, bindings, grace)
}
