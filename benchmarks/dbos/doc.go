// Command dbos measures forkline on PostgreSQL against DBOS Transact Go
// (github.com/dbos-inc/dbos-transact-golang, v1.9.0) on the same server,
// side by side in one process: rows 8d, 8e and 8f of benchmarks/RESULTS.md.
//
// # Why a module of its own
//
// DBOS is a baseline, not a dependency of forkline. Required from the main
// module it would raise, for every user of forkline, the versions of
// golang.org/x/text, jackc/puddle and modernc.org/libc and add its own
// requirements (robfig/cron, jackc/pgerrcode, cobra, viper) to their module
// graphs. In this module (github.com/forkline/forkline/benchmarks/dbos,
// which uses the forkline of this checkout through a replace directive)
// nobody pulls it but who runs it.
//
// # The scenarios
//
//   - 8d, a workflow of 50 durable steps (a step that returns its argument
//     plus one, as scenario 7), one workflow at a time: forkline's Start +
//     Run on a kernel over pgstore (synced) against DBOS's RunWorkflow of a
//     workflow of 50 RunAsStep calls and its handle's GetResult. Figure:
//     steps per second. Target: forkline ≥ 1.5× DBOS (issue 36).
//   - 8e, forking a workflow of 10,000 steps at step 1,000: forkline's
//     Kernel.Fork at the terminal event of the 1,000th step (a header and a
//     fork.created; nothing copied) against DBOS's ForkWorkflow with
//     StartStep 1,000 (which copies the outputs of steps 0..999 into the new
//     workflow). Forks per second; DBOS's forks are made through a Client
//     after the executor that ran the original has shut down, so they are
//     enqueued and never run, as forkline's are never run. Target: forkline
//     ≥ 10× DBOS.
//   - 8f, the workflow of 8d, 16 at a time: one op starts 16 workflows,
//     each from its own goroutine, and ends when all have their results —
//     forkline's Start + Run on one kernel (whose store groups the
//     concurrent workflows' synced appends into one commit per flush,
//     DESIGN §21) against DBOS's RunWorkflow + GetResult on one executor.
//     Figure: steps per second. Target: forkline ≥ 3× DBOS.
//
// Both systems work in schemas of their own, made for the run and dropped
// after it, on the server of -postgres. The measurement is the harness's
// (benchmarks/README.md "How it measures"): one warm-up call each, then
// -rounds rounds of -duration per contestant, the order reversing every
// round; figures are medians over the rounds, the ratio the median of the
// rounds' ratios.
//
// # Running
//
//	cd benchmarks/dbos
//	go run . -postgres postgres://postgres@127.0.0.1:5432/test            # full sizes, prints the rows
//	go run . -short                                                       # 10-step workflows, forks at 100 of 1,000
//	go run . -rows 8f                                                     # only row 8f (-rows takes 8d,8e,8f)
//	go run . -rows 8f -groupcommit=false                                  # forkline's store without group commit
//	go run . -cpuprofile dbos.prof && go tool pprof -top -tagfocus 'contestant=forkline 50-step workflow' dbos.prof
package main
