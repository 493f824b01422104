package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// defaultAddr is where serve listens when --addr is not given: loopback
// only, since the page can create forks.
const defaultAddr = "127.0.0.1:7070"

// cmdServe serves the web page of the data folder's executions (package
// webui) on addr until the command is interrupted. The log stays open, and
// Pebble locks it, so the command advertises itself in the folder
// (serveapi.Advert, removed on exit) and the read commands of other
// processes read through its JSON API meanwhile (DESIGN §11); a write
// command names it in its error. On Postgres nothing is advertised: every
// command opens the database itself.
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
		var h http.Handler = webui.Handler(k, serveOptions(e)...)
		if e.opts.db == "" {
			unadvertise, token, err := advertise(e, ln.Addr())
			if err != nil {
				// The page works without it; only other commands cannot
				// find this process.
				fmt.Fprintf(e.stderr, "forkline: serve: %v; other commands cannot read the log meanwhile\n", err)
			} else {
				defer unadvertise()
				h = withToken(h, token)
			}
		}
		srv := &http.Server{
			Handler:           h,
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

// advertise writes the advert of this process into the data folder and
// returns what removes it, and the token its answers carry.
func advertise(e *env, addr net.Addr) (func(), string, error) {
	token, err := serveapi.NewToken()
	if err != nil {
		return nil, "", err
	}
	a := serveapi.Advert{URL: "http://" + dialAddr(addr) + "/", PID: os.Getpid(), Token: token, Started: time.Now().UTC()}
	if err := serveapi.WriteAdvert(e.opts.dir, a); err != nil {
		return nil, "", err
	}
	return func() {
		if err := serveapi.RemoveAdvert(e.opts.dir, token); err != nil {
			fmt.Fprintf(e.stderr, "forkline: serve: %v\n", err)
		}
	}, token, nil
}

// dialAddr is where a client on this host reaches a listener on addr: the
// loopback address for a listener on every interface.
func dialAddr(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return addr.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if ta.IP.To4() == nil {
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}

// withToken sets the advert's token on every answer of h, by which a
// reader knows it talks to the process the advert names.
func withToken(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(serveapi.TokenHeader, token)
		h.ServeHTTP(w, r)
	})
}
