package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// defaultAddr is where serve listens when --addr is not given: loopback
// only, since the page can create forks.
const defaultAddr = "127.0.0.1:7070"

// serveFlags are the flags of serve.
type serveFlags struct {
	addr     string   // --addr HOST:PORT
	hosts    []string // --allow-host: more names the Host header may give
	token    string   // --token: the secret; "" for a random one
	insecure bool     // --insecure: demand no token
	workers  int      // --workers N: executions Serve runs at once; 0: none (the page only)
}

// defaultWorkers is --workers when it is not given.
const defaultWorkers = 1

// parseWorkers parses --workers: a whole number, 0 or more (the flag
// package names the flag and the value in the error).
func parseWorkers(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("want a whole number, 0 or more (0: the page only, no worker)")
	}
	return n, nil
}

// cmdServe serves the web page of the data folder's executions (package
// webui) on sv.addr until the command is interrupted (SIGINT or SIGTERM),
// and runs what the log holds: a kernel Serve with sv.workers workers
// (sdk.Concurrency; none for 0) runs the executions of the coder agent —
// pending ones, such as a fork made on the page, ones an approval made
// on the page lets go on, interrupted ones — each on the model its
// lineage recorded (servedCoder), and the run route (POST
// /api/e/{id}/run) runs one dispatch for forkline run of another process.
// On a stop the page shuts down, the workers' dispatches are cut by their
// context (recording no outcome, DESIGN §15½.1, so the executions stay
// resumable) and the command exits 0. Every route but
// /login demands the token (sv.token, or a random one), presented by the
// read commands as a bearer header and by a browser through the sign-in
// link printed at start; requests naming a Host other than localhost, a
// loopback address, the listening address or an --allow-host name are
// refused (DNS rebinding). An address that is not loopback is refused
// unless --token or --insecure says the network may reach it. The log
// stays open, and Pebble locks it, so the command advertises itself in the
// folder (serveapi.Advert with the token, mode 0600, removed on exit) and
// the read commands of other processes read through its JSON API
// meanwhile (DESIGN §11); a write command names it in its error. On
// Postgres nothing is advertised: every command opens the database itself.
func cmdServe(e *env, sv serveFlags) error {
	if sv.token != "" && sv.insecure {
		return inputErrorf("serve: --token and --insecure contradict each other: give one")
	}
	for _, h := range sv.hosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ \t") || (strings.Contains(h, ":") && net.ParseIP(strings.Trim(h, "[]")) == nil) {
			return inputErrorf("serve: --allow-host %q: want a host name or an IP address, without a port", clip(h, 64))
		}
	}
	token := sv.token
	if token == "" {
		var err error
		if token, err = serveapi.NewToken(); err != nil {
			return err
		}
	}
	if sv.workers < 0 {
		return inputErrorf("serve: --workers %d: want 0 or more (0: the page only, no worker)", sv.workers)
	}
	return withLog(e, func(s logStore) error {
		k, err := sdk.New(s, ownerOptions(e)...)
		if err != nil {
			return err
		}
		dirfsStore, blobs, closeBlobs, err := coderStores(e)
		if err != nil {
			return err
		}
		defer closeBlobs()
		coderRun, err := registerServedCoder(k, dirfsStore, blobs)
		if err != nil {
			return err
		}
		defer coderRun.close()
		ln, err := net.Listen("tcp", sv.addr)
		if err != nil {
			return inputErrorf("serve: listen on %q: %v", clip(sv.addr, 64), err)
		}
		ta, _ := ln.Addr().(*net.TCPAddr)
		if ta == nil || !ta.IP.IsLoopback() {
			if sv.token == "" && !sv.insecure {
				_ = ln.Close()
				return inputErrorf("serve: %s is not a loopback address, so the network could reach the page: give --token T (a secret every client must present) or --insecure (none), or listen on 127.0.0.1", clip(sv.addr, 64))
			}
		}
		opts := append(serveOptions(e), webui.WithHosts(allowedHosts(sv, ta)...),
			webui.WithRoute("POST /api/e/{id}/run", coderRun.runRoute(k)))
		if !sv.insecure {
			opts = append(opts, webui.WithToken(token))
		}
		var h http.Handler = webui.Handler(k, opts...)
		if sv.insecure {
			h = withProof(h, token)
		}
		reach := dialAddr(sv.addr, ln.Addr())
		if e.opts.db == "" {
			unadvertise, err := advertise(e, reach, token)
			if err != nil {
				// The page works without it; only other commands cannot
				// find this process.
				fmt.Fprintf(e.stderr, "forkline: serve: %v; other commands cannot read the log meanwhile\n", err)
			} else {
				defer unadvertise()
			}
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			// Requests end with the command, so live streams close too.
			BaseContext: func(net.Listener) context.Context { return e.ctx },
		}
		every := ""
		if ta != nil && ta.IP.IsUnspecified() {
			every = ", on every interface"
		}
		fmt.Fprintf(e.stdout, "serving %s on http://%s/ (interrupt to stop%s)\n", e.opts.where(), reach, every)
		if sv.insecure {
			fmt.Fprintf(e.stdout, "no token demanded (--insecure): whoever reaches %s reads every payload and may fork, approve and reject\n", ln.Addr())
		} else {
			fmt.Fprintf(e.stdout, "sign in: http://%s/login?token=%s\n", reach, token)
		}
		if sv.workers == 0 {
			fmt.Fprintf(e.stdout, "no worker (--workers 0): executions wait; forkline run ID runs one in this process\n")
		} else {
			runs := fmt.Sprintf("%d workers run", sv.workers)
			if sv.workers == 1 {
				runs = "1 worker runs"
			}
			fmt.Fprintf(e.stdout, "%s agent %s in this process: forks and approvals made here run here\n", runs, coderAgent)
		}
		// The workers stop with the command, or when the page fails.
		wctx, stopWorkers := context.WithCancel(e.ctx)
		defer stopWorkers()
		workers := make(chan error, 1)
		if sv.workers > 0 {
			go func() { workers <- k.Serve(wctx, sdk.Concurrency(sv.workers)) }()
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		var failed error
		select {
		case err := <-done:
			stopWorkers()
			if sv.workers > 0 {
				<-workers
			}
			return fmt.Errorf("serve: %w", err)
		case err := <-workers:
			// Serve ends by itself only on what no retry mends (a closed or
			// corrupt log): the page stops too. It returns nil only once
			// the command is stopping.
			if err != nil {
				failed = fmt.Errorf("serve: the workers stopped: %w", err)
			}
			workers <- nil // for the wait below
		case <-e.ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		err = <-done
		stopWorkers()
		if sv.workers > 0 && failed == nil {
			if werr := <-workers; werr != nil {
				failed = fmt.Errorf("serve: the workers: %w", werr)
			}
		}
		if failed != nil {
			return failed
		}
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
}

// allowedHosts are the names the Host header may give besides localhost
// and loopback addresses: the host of --addr as written, the listening
// address, every address of this host's interfaces when it listens on all
// of them, and --allow-host's.
func allowedHosts(sv serveFlags, ta *net.TCPAddr) []string {
	hosts := append([]string(nil), sv.hosts...)
	if h, _, err := net.SplitHostPort(sv.addr); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if ta == nil {
		return hosts
	}
	hosts = append(hosts, ta.IP.String())
	if ta.IP.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	}
	return hosts
}

// withProof answers, with --insecure, the requests that present the
// advertised token with its proof (serveapi.ProofHeader), as webui does
// when it demands the token, so that the read commands know the server.
func withProof(h http.Handler, token string) http.Handler {
	want := "Bearer " + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) == 1 {
			w.Header().Set(serveapi.ProofHeader, serveapi.Proof(token))
		}
		h.ServeHTTP(w, r)
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

// advertise writes the advert of this process, reachable at reach with
// token, into the data folder and returns what removes it.
func advertise(e *env, reach, token string) (func(), error) {
	a := serveapi.Advert{URL: "http://" + reach + "/", PID: os.Getpid(), Token: token, Started: time.Now().UTC()}
	if err := serveapi.WriteAdvert(e.opts.dir, a); err != nil {
		return nil, err
	}
	return func() {
		if err := serveapi.RemoveAdvert(e.opts.dir, token); err != nil {
			fmt.Fprintf(e.stderr, "forkline: serve: %v\n", err)
		}
	}, nil
}

// dialAddr is where a client on this host reaches a listener on addr,
// asked for as requested (--addr): for a listener on every interface, the
// loopback address of the family asked for (127.0.0.1 unless --addr named
// the IPv6 wildcard, ::), not the wildcard itself, which Go reports as
// [::] even for 0.0.0.0.
func dialAddr(requested string, addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return addr.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if h, _, err := net.SplitHostPort(requested); err == nil {
		if rip := net.ParseIP(h); rip != nil && rip.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}
