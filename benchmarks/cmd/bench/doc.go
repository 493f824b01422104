// Command bench runs forkline's benchmark scenarios with their baselines in
// one process and writes the results table.
//
//	go run ./benchmarks/cmd/bench                  # full run (seven to ten minutes), writes benchmarks/RESULTS.md and results.json
//	go run ./benchmarks/cmd/bench -short           # CI sizes, seconds; prints the table, writes nothing
//	go run ./benchmarks/cmd/bench -run '^3' -cpuprofile replay.prof
//
// # Flags
//
//	-short        small sizes, one round of 100ms per contestant
//	-duration d   how long each contestant is measured per round (default 2s; short 100ms)
//	-rounds n     interleaved rounds; medians are reported (default 5; short 1)
//	-out dir      where RESULTS.md and results.json go (default "benchmarks"; with -short
//	              nothing is written unless -out is given)
//	-run regexp   only the scenarios whose number or name matches
//	-tmp dir      where the on-disk stores go (default the system temporary folder;
//	              it must be a real disk: most figures are bounded by fsync)
//	-cpuprofile f write a CPU profile of the run (each measurement carries the
//	              pprof label contestant=<name>: cut it with -tagfocus)
//	-heapprofile f write the heap profile taken when the handler of scenario
//	              3m's large replay returns
//	-quiet        no progress lines on stderr
//
// The scenarios, their baselines and targets are described in
// [github.com/forkline/forkline/benchmarks] and in benchmarks/README.md.
package main
