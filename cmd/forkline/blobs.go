package main

import (
	"fmt"
	neturl "net/url"
	"path/filepath"
	"strings"

	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/blob/pgblob"
	"github.com/forkline/forkline/eventlog/pgstore"
)

// openBlobs opens the shared checkpoint store --blob names (DESIGN §11,
// shared checkpoints): nil when none is given (the workspace store in
// DIR/dirfs alone), pgblob for a postgres:// URL — in the URL's
// forkline_schema (default pgblob.DefaultSchema), namespaced by the --db
// log's schema so that two logs never share blobs — and blob.Dir
// otherwise. The returned func releases it.
func openBlobs(e *env) (blob.Store, func(), error) {
	raw := e.opts.blob
	if raw == "" {
		return nil, func() {}, nil
	}
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		d, err := blob.NewDir(raw)
		if err != nil {
			return nil, nil, &inputError{fmt.Errorf("--blob %s: %w", raw, err)}
		}
		return d, func() {}, nil
	}
	url, schema, err := splitSchema(raw)
	if err != nil {
		return nil, nil, &inputError{fmt.Errorf("--blob: %w", err)}
	}
	ns := pgstore.DefaultSchema
	if e.opts.db != "" {
		if _, s, err := splitSchema(e.opts.db); err == nil && s != "" {
			ns = s
		}
	}
	s, err := pgblob.Open(e.ctx, url, pgblob.Options{Schema: schema, Namespace: ns})
	if err != nil {
		return nil, nil, fmt.Errorf("--blob: %w", err)
	}
	return s, s.Close, nil
}

// splitSchema removes the forkline_schema parameter from a postgres URL
// and returns its value ("" when absent).
func splitSchema(raw string) (string, string, error) {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	schema := q.Get(pgstore.SchemaParam)
	q.Del(pgstore.SchemaParam)
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// coderStores opens what the coder agent's workspaces live in: the data
// folder's dirfs store, as an absolute path (dirfs records no path,
// DESIGN §11, so a copied or moved data folder forks from its own
// checkpoints), and the shared checkpoint store of --blob (openBlobs),
// released by the returned func.
func coderStores(e *env) (dirfsStore string, blobs blob.Store, closeBlobs func(), err error) {
	if dirfsStore, err = filepath.Abs(storeDir(e.opts.dir)); err != nil {
		return "", nil, nil, err
	}
	if blobs, closeBlobs, err = openBlobs(e); err != nil {
		return "", nil, nil, err
	}
	return dirfsStore, blobs, closeBlobs, nil
}
