// Package coverage answers, for any event N of a lineage, whether a fork at N
// restores every resource exactly — whether N is covered — and which
// checkpoint each resource restores from (DESIGN §5 "Coverage:
// generations"). It is a pure fold: it imports only [eventlog], does no IO,
// reads no clock and gives the same answer for the same events.
//
// # Generations
//
// The generation, in-flight steps and newest checkpoint of each resource
// after each event come from [eventlog.IndexState], the single
// implementation of DESIGN §5's bookkeeping: an own resource.bound starts a
// generation (bound from a ref, that ref is a checkpoint of it); a live
// step.started that advances the resource starts one and is in flight until
// its terminal event (by default every live step advances every resource; a
// CoverageReuse resource only tool calls and local steps that affect it); a
// resource.captured records a checkpoint of the generation it names; a
// fork.created selection marked Covered is a checkpoint of the current
// generation.
//
// # Covered and selected
//
// Let g be resource R's generation after event N. R is covered at N when no
// step that advances R is in flight and some checkpoint of g exists in the
// lineage: the newest one at or before N, or one established after N while
// the generation is still g (a capture committed with a step's outcome covers
// that outcome). [Point.Covered] holds when every resource bound up to N is
// covered, so also when there is none.
//
// The [Selection] for R at N is the newest checkpoint of g in the lineage if
// R is covered; otherwise the newest checkpoint at or before N; otherwise the
// initial environment (Ref "", CapturedAt 0). Its Generation is g either
// way. A fork at a step.started is uncovered for every resource the step
// advances — the fork runs the step again, so it needs the state from before
// it, which is what the fallback selects.
//
// # At_most_once calls in flight
//
// [Point.InFlight] lists the at_most_once steps started at or before the
// point with no outcome by it. A fork there restores its resources as the
// selections say, but the call's effect is unknown and at_most_once
// forbids running it again: the fork's handler gets the call as
// indeterminate, and the fork may end otherwise than its parent however
// covered the point is. [Fold.Point] fills it from the events it folded;
// [At] reads only the index, which holds no steps, and leaves it nil —
// [InFlightAt] folds a lineage's events up to the point for it.
//
// # Choices written down
//
// Coverage reads the index states, so it sees what [eventlog.IndexState]
// keeps: a resource's Latest is its newest checkpoint. A capture must name
// the resource's current generation — the SDK takes one only while nothing
// advances the resource — and a capture of an older generation is rejected
// as invalid, so it can never hide a checkpoint of the current generation.
//
// A checkpoint a fork carried over from its parent keeps the parent's seq as
// its CapturedAt, which may lie after the fork point (DESIGN §5).
//
// # Two ways to ask
//
// [Fold] folds a lineage in memory ([New], [Fold.Apply], [FoldEvents]) and
// answers [Fold.Point] for any seq in O(resources · log events), the
// [Fold.Windows] of coverage for a timeline, and the newest [Fold.State] and
// [Fold.Covered] of a resource for an SDK that runs the lineage. [At] answers
// the same [Point] from a store's [eventlog.Index] without folding, with a
// few index reads: that is how a fork of event 1,000,000 is planned. Both go
// through one selection function, so they cannot disagree; the tests check
// them against each other and against a deliberately naive model.
package coverage
