package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
)

// logStore is what the commands need of a log: the Pebble log of a data
// folder or, with --db, the Postgres one.
type logStore interface {
	eventlog.IndexedLog
	eventlog.Leaser
	eventlog.Inbox
}

// where names the log of e for messages: the database or the data folder.
func (o *options) where() string {
	if o.db != "" {
		return redactURL(o.db)
	}
	return o.dir
}

// redactURL drops the password of a database URL, for messages.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = neturl.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// openDB opens the Postgres log at url (--db), creating its tables if
// needed. Postgres needs no read-only mode: every command reads directly,
// while workers write (DESIGN §11).
func openDB(ctx context.Context, url string) (logStore, error) {
	if !sdk.IsPostgresURL(url) {
		return nil, inputErrorf("--db %q: want a postgres:// or postgresql:// URL", redactURL(url))
	}
	s, err := pgstore.Open(ctx, url)
	switch {
	case errors.Is(err, eventlog.ErrInvalid), errors.Is(err, pgstore.ErrSchemaTooNew):
		return nil, &inputError{fmt.Errorf("--db %s: %w", redactURL(url), err)}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", redactURL(url), err)
	}
	return s, nil
}

// logDir is where the event log of data folder dir lives.
func logDir(dir string) string { return filepath.Join(dir, "log") }

// storeDir is where the coder agent's dirfs store of data folder dir lives.
func storeDir(dir string) string { return filepath.Join(dir, "dirfs") }

// openExisting opens the log of the data folder for a command that must not
// create one: a missing or empty log folder is "not a forkline log". A
// read-only open (the inspection commands) writes no file of the log.
func openExisting(e *env, readOnly bool) (logStore, error) {
	if e.opts.db != "" {
		return openDB(e.ctx, e.opts.db)
	}
	dir := e.opts.dir
	ld := logDir(dir)
	fi, err := os.Stat(ld)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, inputErrorf("%s: not a forkline log (no %s; run forkline demo, or pass --dir)", dir, ld)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("open %s: %w", ld, err)
	case err != nil:
		return nil, inputErrorf("%s: not a forkline log: %v", dir, err)
	case !fi.IsDir():
		return nil, inputErrorf("%s: not a forkline log (%s is not a folder)", dir, ld)
	}
	entries, err := os.ReadDir(ld)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("open %s: %w", ld, err)
	}
	if err != nil {
		return nil, inputErrorf("%s: not a forkline log: %v", dir, err)
	}
	if len(entries) == 0 {
		return nil, inputErrorf("%s: not a forkline log (%s is empty)", dir, ld)
	}
	if readOnly {
		return open(dir, pebblestore.ReadOnly())
	}
	return open(dir)
}

// openLog opens (creating it if needed) the log of the data folder, with
// one-line errors for the cases a user can fix.
func openLog(e *env) (logStore, error) {
	if e.opts.db != "" {
		return openDB(e.ctx, e.opts.db)
	}
	dir := e.opts.dir
	if fi, err := os.Stat(logDir(dir)); err == nil && !fi.IsDir() {
		return nil, inputErrorf("%s: not a forkline log (%s is not a folder)", dir, logDir(dir))
	}
	return open(dir)
}

// open opens the log of the data folder with opts, classifying its errors.
func open(dir string, opts ...pebblestore.Option) (logStore, error) {
	s, err := pebblestore.Open(logDir(dir), opts...)
	switch {
	case errors.Is(err, pebblestore.ErrLocked):
		return nil, &inputError{fmt.Errorf("%s: the log is in use by another process (%w)", logDir(dir), pebblestore.ErrLocked)}
	case errors.Is(err, pebblestore.ErrNotALog):
		return nil, &inputError{fmt.Errorf("%s: not a forkline log (%w)", dir, err)}
	case errors.Is(err, eventlog.ErrCorrupt):
		return nil, fmt.Errorf("the log in %s is damaged; nothing was changed: %w", logDir(dir), err)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", logDir(dir), err)
	}
	return s, nil
}

// withLog opens the existing log of e's data folder for writing, runs fn
// and closes it.
func withLog(e *env, fn func(s logStore) error) error {
	s, err := openExisting(e, false)
	if err != nil {
		return servedWrite(e, err)
	}
	return runAndClose(s, func() error { return fn(s) })
}

// withReadLog opens the existing log of e's data folder read-only, runs fn
// and closes it. The inspection commands use it: they work on a read-only
// mount and never flush, compact or delete a file of the log. When another
// process holds the folder's log, they read through it if it serves the
// log (DESIGN §11): see readServed.
func withReadLog(e *env, fn func(s eventlog.IndexedLog) error) error {
	s, err := openExisting(e, true)
	if errors.Is(err, pebblestore.ErrLocked) {
		var r *serveapi.Log
		if r, err = readServed(e, err); err == nil {
			return runAndClose(r, func() error { return fn(r) })
		}
	}
	if err != nil {
		return err
	}
	return runAndClose(s, func() error { return fn(s) })
}

// runAndClose runs fn, then closes s.
func runAndClose(s io.Closer, fn func() error) error {
	err := fn()
	if cerr := s.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close log: %w", cerr)
	}
	return err
}

// readServed reads the data folder's log through the process that holds
// it, when that process advertises itself in the folder (serveapi.Advert,
// written by forkline serve) and answers with the advertised token; a
// stale advert left by a crash is never trusted. locked is the error of
// the open that found the log in use.
func readServed(e *env, locked error) (*serveapi.Log, error) {
	dir := e.opts.dir
	a, ok, err := serveapi.ReadAdvert(dir)
	if err != nil {
		return nil, &inputError{fmt.Errorf("%s: the log is in use by another process, and %w", logDir(dir), err)}
	}
	if !ok {
		return nil, &inputError{fmt.Errorf("%w, and no forkline serve advertises it in %s: "+
			"to read a log while it is written, let `forkline serve --dir %s` hold it and run the command again",
			locked, filepath.Join(dir, serveapi.AdvertFile), dir)}
	}
	r, err := serveapi.Dial(e.ctx, a.URL, a.Token)
	if err != nil {
		return nil, &inputError{fmt.Errorf("%s: the log is in use by another process; %s names forkline serve (pid %d) at %s, which does not answer: %w",
			logDir(dir), filepath.Join(dir, serveapi.AdvertFile), a.PID, a.URL, err)}
	}
	return r, nil
}

// servedWrite explains err, the failure of a write command to open the
// log, when the process holding it is a serving one: the command names it.
func servedWrite(e *env, err error) error {
	if !errors.Is(err, pebblestore.ErrLocked) {
		return err
	}
	a, ok, aerr := serveapi.ReadAdvert(e.opts.dir)
	if aerr != nil || !ok {
		return err
	}
	r, derr := serveapi.Dial(e.ctx, a.URL, a.Token)
	if derr != nil {
		return err
	}
	_ = r.Close()
	return &inputError{fmt.Errorf("%s: the log is in use by another process, forkline serve (pid %d) at %s (%w): "+
		"this command writes, which only that process may do while it runs; use its page, or stop it and run the command again",
		logDir(e.opts.dir), a.PID, a.URL, pebblestore.ErrLocked)}
}

// resolve finds the one execution whose ID starts with prefix (hex digits,
// dashes ignored).
func resolve(e *env, log eventlog.Log, prefix string) (eventlog.Info, error) {
	want := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if want == "" || len(want) > 32 || strings.Trim(want, "0123456789abcdef") != "" {
		return eventlog.Info{}, inputErrorf("bad id %q: want hex digits of an execution id (a prefix will do)", clip(prefix, 64))
	}
	var found []eventlog.Info
	for info, err := range log.List(e.ctx, eventlog.Filter{}) {
		if err != nil {
			return eventlog.Info{}, fmt.Errorf("list executions: %w", err)
		}
		if strings.HasPrefix(hex.EncodeToString(info.ID[:]), want) {
			found = append(found, info)
		}
	}
	switch len(found) {
	case 0:
		return eventlog.Info{}, &inputError{fmt.Errorf("no execution %q in %s (%w)", prefix, e.opts.where(), eventlog.ErrNotFound)}
	case 1:
		return found[0], nil
	}
	return eventlog.Info{}, inputErrorf("ambiguous id prefix %q: %d executions match; give more digits", prefix, len(found))
}

// parseSeq parses a seq of an execution whose lineage has events 1..head.
func parseSeq(s string, info eventlog.Info) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, inputErrorf("bad seq %q: want a number from 1 to %d", clip(s, 64), info.Head)
	}
	if n == 0 || n > info.Head {
		return 0, inputErrorf("seq %d out of range: execution %s has events 1 to %d", n, info.ID, info.Head)
	}
	return n, nil
}
