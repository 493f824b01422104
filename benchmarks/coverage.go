package benchmarks

import (
	"github.com/dustin/go-humanize"

	"context"
	"fmt"
	"math/rand/v2"

	"github.com/forkline/forkline/coverage"
)

// Scenario 5, coverage: folding a long coder-agent history read from the
// store (what a timeline view or a fork picker does first), against
// scanning and decoding the same records from Pebble directly; then point
// queries on the fold (the picker scrubbing through the history).

// foldOp folds the history from the store; units are events.
func (h *historyFixture) foldOp(ctx context.Context) op {
	return timed(func() (float64, error) {
		f, err := coverage.FoldEvents(h.st.Events(ctx, h.id, 1))
		if err != nil {
			return 0, err
		}
		if f.Head() != uint64(h.n) {
			return 0, fmt.Errorf("%w: fold head %d, want %d", errCheck, f.Head(), h.n)
		}
		return float64(h.n), nil
	})
}

// pointSeqs are the seqs point queries ask for: uniform over the history,
// fixed seed.
func pointSeqs(n int) []uint64 {
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := make([]uint64, 1<<16)
	for i := range seqs {
		seqs[i] = 1 + rng.Uint64N(uint64(n))
	}
	return seqs
}

// pointOp asks f for the points of every seq in seqs; units are queries. It
// checks that some of them are covered and some not, as in any coder-agent
// history with EverySteps(5).
func pointOp(f *coverage.Fold, seqs []uint64) op {
	return timed(func() (float64, error) {
		covered := 0
		for _, s := range seqs {
			p, err := f.Point(s)
			if err != nil {
				return 0, err
			}
			if p.Covered {
				covered++
			}
		}
		if covered == 0 || covered == len(seqs) {
			return 0, fmt.Errorf("%w: %d of %d points covered", errCheck, covered, len(seqs))
		}
		return float64(len(seqs)), nil
	})
}

func runCoverage(e *env) ([]Row, error) {
	h, err := e.history()
	if err != nil {
		return nil, err
	}
	rates, load, err := e.interleave(
		contestant{"forkline coverage.FoldEvents from the store", h.foldOp(e.ctx)},
		contestant{"raw Pebble scan + msgpack decode", timed(func() (float64, error) {
			n, err := h.raw.scanDecode(h.id)
			return float64(n), err
		})},
	)
	if err != nil {
		return nil, err
	}
	fold := Figure{What: "forkline", Value: median(rates[0]), Unit: "events/s", Rounds: rates[0]}
	base := Figure{What: "raw Pebble scan + msgpack decode", Value: median(rates[1]), Unit: "events/s", Rounds: rates[1]}
	a := rowOf("5a", fmt.Sprintf("coverage fold of %s events", humanize.Comma(int64(h.n))), fmt.Sprintf("CoverageFold/events=%d/system=forkline", h.n),
		fold, base, div, "fold/decode", "≥ 0.5", atLeast(0.5), load)
	a.Note = "coverage.FoldEvents over the store's Events: reading, decoding and checking the records, then the fold."

	f, err := coverage.FoldEvents(h.st.Events(e.ctx, h.id, 1))
	if err != nil {
		return nil, err
	}
	seqs := pointSeqs(h.n)
	prates, pload, err := e.interleave(contestant{"forkline Fold.Point", pointOp(f, seqs)})
	if err != nil {
		return nil, err
	}
	pts := Figure{What: "forkline", Value: median(prates[0]), Unit: "queries/s", Rounds: prates[0]}
	b := Row{ID: "5b", Scenario: fmt.Sprintf("coverage point queries on a %s-event fold", humanize.Comma(int64(h.n))),
		Bench: fmt.Sprintf("CoveragePoint/events=%d", h.n), Forkline: pts, Target: "≥ 1M queries/s", Load: pload,
		Note: "Fold.Point at uniformly random seqs (fixed seed); an absolute target, no baseline."}
	met := pts.Value >= 1e6
	b.Met = &met
	return []Row{a, b}, nil
}
