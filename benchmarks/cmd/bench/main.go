package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"

	"github.com/forkline/forkline/benchmarks"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg benchmarks.Config
	var out, runExpr, cpuProfile, heapProfile string
	var quiet bool
	flag.BoolVar(&cfg.Short, "short", false, "small sizes and one short round (what CI runs)")
	flag.DurationVar(&cfg.Duration, "duration", 0, "measurement time per contestant per round (default 2s; short 100ms)")
	flag.IntVar(&cfg.Rounds, "rounds", 0, "interleaved rounds, medians reported (default 5; short 1)")
	flag.StringVar(&out, "out", "benchmarks", "folder for RESULTS.md and results.json (\"\" for none; with -short the default is none)")
	flag.StringVar(&runExpr, "run", "", "only scenarios whose number or name matches this regexp")
	flag.StringVar(&cfg.TempDir, "tmp", "", "folder for the on-disk stores (default: the system temporary folder)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&heapProfile, "heapprofile", "", "write the heap profile taken at the end of scenario 3m's large replay to this file")
	flag.StringVar(&cfg.Postgres, "postgres", "", "URL of the PostgreSQL server for scenario 8 (default: scenario 8 is skipped)")
	flag.BoolVar(&quiet, "quiet", false, "no progress lines")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if cfg.Short && !outSet {
		out = ""
	}
	if runExpr != "" {
		re, err := regexp.Compile(runExpr)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		cfg.Run = re
	}
	cfg.Progress = os.Stderr
	if quiet {
		cfg.Progress = io.Discard
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if heapProfile != "" {
		f, err := os.Create(heapProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.HeapProfile = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	report, err := benchmarks.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Print(report.Markdown())
	if out != "" {
		if err := report.Write(out); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s/RESULTS.md and %s/results.json\n", out, out)
	}
	return nil
}
