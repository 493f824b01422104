package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// defaultAddr is where serve listens when --addr is not given: loopback
// only, since the page can create forks.
const defaultAddr = "127.0.0.1:7070"

// cmdServe serves the web page of the data folder's executions (package
// webui) on addr until the command is interrupted. The log stays open, so
// other commands on the folder answer that it is in use meanwhile.
func cmdServe(e *env, addr string) error {
	return withLog(e, func(s logStore) error {
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return inputErrorf("serve: listen on %q: %v", addr, err)
		}
		srv := &http.Server{
			Handler:           webui.Handler(k, serveOptions(e)...),
			ReadHeaderTimeout: 10 * time.Second,
			// Requests end with the command, so live streams close too.
			BaseContext: func(net.Listener) context.Context { return e.ctx },
		}
		fmt.Fprintf(e.stdout, "serving %s on http://%s/ (interrupt to stop)\n", e.opts.where(), ln.Addr())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err := <-done:
			return fmt.Errorf("serve: %w", err)
		case <-e.ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
}

// serveOptions lets the diff page compare workspaces of the data folder's
// dirfs store.
func serveOptions(e *env) []webui.Option {
	var opts []webui.Option
	for id, d := range differs(e) {
		opts = append(opts, webui.WithDiffer(id, d))
	}
	return opts
}
