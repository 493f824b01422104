package benchmarks

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/monoprocess"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/forkline/forkline/sdk"
)

// Scenario 7, a peer engine: the same workflow of N durable steps — each a
// call of an activity (go-workflows) or a tool (forkline) that returns its
// argument plus one — run on github.com/cschleiden/go-workflows with its
// SQLite backend (an embedded Go durable-execution engine; pure Go,
// modernc.org/sqlite, WAL mode) and on forkline, one workflow at a time and
// many at a time. Both run in this process on a database file on disk;
// steps per second of completed workflows.

// peerWorkflow is the go-workflows workflow: steps activities in sequence.
func peerWorkflow(ctx workflow.Context, steps int) (int, error) {
	v := 0
	for range steps {
		r, err := workflow.ExecuteActivity[int](ctx, workflow.DefaultActivityOptions, peerActivity, v).Get(ctx)
		if err != nil {
			return 0, err
		}
		v = r
	}
	return v, nil
}

// peerActivity is the step's body.
func peerActivity(_ context.Context, v int) (int, error) { return v + 1, nil }

// finishNotifier is a go-workflows backend that tells a waiting caller when
// a workflow instance has finished, right after the worker committed it:
// the client's WaitForWorkflowInstance polls with a backoff of up to a
// second, which would count as the engine's time.
type finishNotifier struct {
	backend.Backend
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

// CompleteWorkflowTask implements backend.Backend.
func (b *finishNotifier) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executed, activities, timers []*history.Event, workflowEvents []*history.WorkflowEvent) error {
	if err := b.Backend.CompleteWorkflowTask(ctx, task, state, executed, activities, timers, workflowEvents); err != nil {
		return err
	}
	if state == core.WorkflowInstanceStateFinished {
		b.mu.Lock()
		ch := b.waiters[task.WorkflowInstance.InstanceID]
		delete(b.waiters, task.WorkflowInstance.InstanceID)
		b.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	}
	return nil
}

// wait returns a channel closed when instance id finishes.
func (b *finishNotifier) wait(id string) <-chan struct{} {
	ch := make(chan struct{})
	b.mu.Lock()
	b.waiters[id] = ch
	b.mu.Unlock()
	return ch
}

// goWorkflows is a running go-workflows engine on a SQLite file.
type goWorkflows struct {
	be     *finishNotifier
	c      *client.Client
	w      *worker.Worker
	cancel context.CancelFunc
	next   atomic.Int64
}

// openGoWorkflows starts the engine as its own benchmark does for SQLite: the
// SQLite backend wrapped in the monoprocess backend (which wakes the worker
// in-process instead of polling), default worker options, logs dropped.
func openGoWorkflows(ctx context.Context, path string) (g *goWorkflows, err error) {
	defer func() {
		// The SQLite backend panics when it cannot open or migrate.
		if r := recover(); r != nil {
			g, err = nil, fmt.Errorf("go-workflows: %v", r)
		}
	}()
	be := sqlite.NewSqliteBackend(path, sqlite.WithBackendOptions(backend.WithLogger(slog.New(slog.DiscardHandler))))
	g = &goWorkflows{be: &finishNotifier{Backend: monoprocess.NewMonoprocessBackend(be), waiters: make(map[string]chan struct{})}}
	wctx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	g.w = worker.New(g.be, &worker.DefaultOptions)
	if err := g.w.RegisterWorkflow(peerWorkflow); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.w.RegisterActivity(peerActivity); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.w.Start(wctx); err != nil {
		g.Close()
		return nil, err
	}
	g.c = client.New(g.be)
	return g, nil
}

// Close stops the worker and closes the database.
func (g *goWorkflows) Close() error {
	g.cancel()
	if g.w != nil {
		_ = g.w.WaitForCompletion()
	}
	return g.be.Close()
}

// run runs one workflow of steps steps to completion.
func (g *goWorkflows) run(ctx context.Context, steps int) error {
	id := fmt.Sprintf("peer-%d", g.next.Add(1))
	done := g.be.wait(id)
	if _, err := g.c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: id}, peerWorkflow, steps); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("go-workflows: workflow %s did not finish in 5 minutes", id)
	}
}

// check runs one workflow and reads its result through the client, to be
// sure the figures count workflows that did their work.
func (g *goWorkflows) check(ctx context.Context, steps int) error {
	id := fmt.Sprintf("peer-check-%d", g.next.Add(1))
	inst, err := g.c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: id}, peerWorkflow, steps)
	if err != nil {
		return err
	}
	v, err := client.GetWorkflowResult[int](ctx, g.c, inst, time.Minute)
	if err != nil {
		return err
	}
	if v != steps {
		return fmt.Errorf("%w: go-workflows workflow returned %d, want %d", errCheck, v, steps)
	}
	return nil
}

const peerAgent = "steps"

// openPeerKernel opens a forkline kernel on disk with the same workflow: an
// agent whose handler calls a tool steps times in sequence.
func openPeerKernel(dir string, opts ...sdk.Option) (*sdk.Kernel, error) {
	k, err := sdk.Open(dir, opts...)
	if err != nil {
		return nil, err
	}
	if err := registerPeer(k); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// registerPeer registers the workflow's agent on k: a handler that calls
// a tool steps times in sequence.
func registerPeer(k *sdk.Kernel) error {
	step := sdk.DefineTool("step", peerActivity)
	_, err := sdk.Register(k, peerAgent, func(ctx context.Context, steps int) (int, error) {
		v := 0
		for range steps {
			r, err := step.Call(ctx, v)
			if err != nil {
				return 0, err
			}
			v = r
		}
		return v, nil
	})
	return err
}

// runPeerKernel runs one execution of steps steps and checks its output.
func runPeerKernel(ctx context.Context, k *sdk.Kernel, steps int) error {
	id, err := k.Start(ctx, peerAgent, steps)
	if err != nil {
		return err
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		return err
	}
	var v int
	if err := res.Decode(&v); err != nil {
		return err
	}
	if v != steps {
		return fmt.Errorf("%w: forkline workflow returned %d, want %d", errCheck, v, steps)
	}
	return nil
}

func runPeer(e *env) ([]Row, error) {
	dir, err := e.mkdir("peer")
	if err != nil {
		return nil, err
	}
	k, err := openPeerKernel(filepath.Join(dir, "forkline"))
	if err != nil {
		return nil, err
	}
	defer k.Close()
	g, err := openGoWorkflows(e.ctx, filepath.Join(dir, "go-workflows.sqlite"))
	if err != nil {
		return nil, err
	}
	defer g.Close()
	steps := e.sizes.PeerSteps
	if err := g.check(e.ctx, steps); err != nil {
		return nil, err
	}
	level, err := sqliteDefaultSynchronous(filepath.Join(dir, "go-workflows.sqlite"))
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, c := range []int{1, e.sizes.PeerConcurrent} {
		d := e.cfg.Duration
		rates, load, err := e.interleave(
			contestant{fmt.Sprintf("forkline, %d workflows at a time", c), parallel(c, d, func(int) (float64, error) {
				return float64(steps), runPeerKernel(e.ctx, k, steps)
			})},
			contestant{fmt.Sprintf("go-workflows SQLite, %d workflows at a time", c), parallel(c, d, func(int) (float64, error) {
				return float64(steps), g.run(e.ctx, steps)
			})},
		)
		if err != nil {
			return nil, err
		}
		fl := Figure{What: "forkline", Value: median(rates[0]), Unit: "steps/s", Rounds: rates[0]}
		gw := Figure{What: "go-workflows v1.2.0, SQLite", Value: median(rates[1]), Unit: "steps/s", Rounds: rates[1]}
		label := "1 workflow at a time"
		if c > 1 {
			label = fmt.Sprintf("%d workflows at a time", c)
		}
		row := rowOf([]string{"7a", "7b"}[i], fmt.Sprintf("workflow of %d durable steps, %s, vs go-workflows", steps, label),
			fmt.Sprintf("Peer/engine=forkline/concurrency=%d", c), fl, gw, div, "forkline/go-workflows", "≥ 3", atLeast(3), load)
		row.Note = fmt.Sprintf("Steps of completed workflows per second. forkline's kernel syncs every step (sdk.Open on disk); go-workflows' SQLite backend sets WAL mode and leaves synchronous at the driver's default, %s.", level)
		rows = append(rows, row)
	}
	return rows, nil
}

// sqliteDefaultSynchronous returns the synchronous setting a new connection
// to the database at path gets when it sets none, as go-workflows' does.
func sqliteDefaultSynchronous(path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var level int
	if err := db.QueryRow("PRAGMA synchronous").Scan(&level); err != nil {
		return "", err
	}
	names := []string{"OFF", "NORMAL", "FULL", "EXTRA"}
	if level >= 0 && level < len(names) {
		return fmt.Sprintf("%d (%s)", level, names[level]), nil
	}
	return fmt.Sprint(level), nil
}
