package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/sdk"
)

// kernelFlags are `forkline kernel`'s flags.
type kernelFlags struct {
	listen string
	token  string
	dev    bool
}

// cmdKernel runs `forkline kernel`: the kernel over HTTP for agents in any
// language (package kernelapi, DESIGN §20), on the log of --dir or --db.
// It listens on --listen only (default loopback) and demands a bearer
// token unless --dev.
func cmdKernel(e *env, kf kernelFlags) error {
	if kf.token != "" && kf.dev {
		return inputErrorf("kernel: --token and --dev contradict each other: give one")
	}
	if kf.token == "" && !kf.dev {
		return inputErrorf("kernel: give --token T (the bearer token of client and admin routes) or --dev (none)")
	}
	return withOpenLog(e, func(s logStore) error {
		metrics, err := kernelapi.NewMetrics()
		if err != nil {
			return err
		}
		defer func() { _ = metrics.Shutdown(context.Background()) }()
		k, err := sdk.New(s, sdk.ParkAfter(20*time.Second), metrics.Option())
		if err != nil {
			return err
		}
		srv, err := kernelapi.Handler(k, kernelapi.Options{Token: kf.token, Dev: kf.dev, Metrics: metrics})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", kf.listen)
		if err != nil {
			return inputErrorf("kernel: listen on %q: %v", clip(kf.listen, 64), err)
		}
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
			BaseContext: func(net.Listener) context.Context { return e.ctx }}
		fmt.Fprintf(e.stdout, "kernel API of %s on http://%s/v0 (interrupt to stop)\n", e.opts.where(), ln.Addr())
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Add(1)
		serveErr := make(chan error, 1)
		go func() {
			defer wg.Done()
			serveErr <- srv.Serve(ctx)
		}()
		done := make(chan error, 1)
		go func() { done <- hs.Serve(ln) }()
		var runErr error
		select {
		case err := <-done:
			runErr = fmt.Errorf("kernel: %w", err)
		case err := <-serveErr:
			if err != nil {
				runErr = fmt.Errorf("kernel: %w", err)
			}
		case <-e.ctx.Done():
		}
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close()
		}
		wg.Wait()
		if err := <-done; runErr == nil && !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("kernel: %w", err)
		}
		return runErr
	})
}

// withOpenLog opens (creating if needed) the log of e, runs fn and closes it.
func withOpenLog(e *env, fn func(s logStore) error) error {
	s, err := openLog(e)
	if err != nil {
		return err
	}
	return runAndClose(s, func() error { return fn(s) })
}
