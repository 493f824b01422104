package fork

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// infoLog answers Info from a map; chain calls nothing else.
type infoLog struct {
	eventlog.Log
	infos map[eventlog.ID]eventlog.Info
}

func (l infoLog) Info(_ context.Context, id eventlog.ID) (eventlog.Info, error) {
	info, ok := l.infos[id]
	if !ok {
		return eventlog.Info{}, fmt.Errorf("%w: %s", eventlog.ErrNotFound, id)
	}
	return info, nil
}

// TestChainLimit: a fork chain of maxAncestors executions is walked whole;
// one of maxAncestors+1 is refused as corrupt (DESIGN §12 "Diff").
func TestChainLimit(t *testing.T) {
	// n executions, each a fork of the next at seq 1; the last is a root.
	build := func(n int) (infoLog, eventlog.ID) {
		id := func(i int) eventlog.ID {
			var x eventlog.ID
			binary.BigEndian.PutUint64(x[8:], uint64(i+1))
			return x
		}
		l := infoLog{infos: make(map[eventlog.ID]eventlog.Info, n)}
		for i := range n {
			info := eventlog.Info{ID: id(i), Head: 2}
			if i < n-1 {
				info.Parent, info.ForkSeq = id(i+1), 1
			}
			l.infos[id(i)] = info
		}
		return l, id(0)
	}
	ctx := context.Background()
	l, youngest := build(maxAncestors)
	links, err := chain(ctx, l, youngest)
	if err != nil {
		t.Fatalf("chain of %d executions: %v", maxAncestors, err)
	}
	if len(links) != maxAncestors || links[0] != (link{youngest, 2}) || links[1].upto != 1 {
		t.Fatalf("chain of %d executions: %d links, first %v, second %v", maxAncestors, len(links), links[0], links[1])
	}
	l, youngest = build(maxAncestors + 1)
	if _, err := chain(ctx, l, youngest); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("chain of %d executions: %v, want an error wrapping ErrCorrupt", maxAncestors+1, err)
	}
}
