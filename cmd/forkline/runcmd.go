package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/forkline/forkline/eventlog"
)

// cmdRun runs one dispatch of an execution of the coder agent, such as a
// fork made with forkline fork.
func cmdRun(e *env, idArg string) error {
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		if info.Agent != coderAgent {
			return &inputError{fmt.Errorf("execution %s is of agent %q: %w; run it with the program that registers that agent (sdk.Kernel.Run)",
				info.ID, info.Agent, errNotCoder)}
		}
		l, err := readLineage(e, s, info, 0)
		if err != nil {
			return err
		}
		m, err := modelFor(l)
		if err != nil {
			return err
		}
		defer m.close()
		// The data folder's own store, wherever the lineage was recorded:
		// dirfs records no path (DESIGN §11), so a copied or moved data
		// folder forks from its own checkpoints.
		dirfsStore, err := filepath.Abs(storeDir(e.opts.dir))
		if err != nil {
			return err
		}
		blobs, closeBlobs, err := openBlobs(e)
		if err != nil {
			return err
		}
		defer closeBlobs()
		ck, err := openCoderKernel(s, dirfsStore, blobs, m, ownerOptions(e)...)
		if err != nil {
			return err
		}
		defer ck.k.Close()
		before := l.status()
		res, runErr := ck.k.Run(e.ctx, info.ID)
		after, err := readCoderLineage(e, ck, info.ID)
		if err != nil {
			return err
		}
		if e.opts.json {
			out := map[string]any{"id": info.ID.String(), "model": m.Name, "scripted": m.scripted,
				"status": after.status(), "head": after.info.Head, "appended": after.info.Head - info.Head}
			if res != nil {
				out["output"] = json.RawMessage(eventlog.JSONValue(res.Output))
			}
			if runErr != nil {
				out["error"] = runErr.Error()
			}
			if err := writeJSON(e.stdout, out); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.stdout, "model: %s\n", m.describe())
			switch {
			case l.info.Status.Terminal():
				fmt.Fprintf(e.stdout, "execution %s had already %s; nothing ran\n", info.ID, before)
			default:
				fmt.Fprintf(e.stdout, "execution %s: %s, %d events (%d appended; live calls: %s)\n",
					info.ID, after.status(), after.info.Head, after.info.Head-info.Head, liveCalls(after, info.Head))
			}
			if res != nil {
				fmt.Fprintf(e.stdout, "output: %s\n", eventlog.ValueText(res.Output, 100))
			}
		}
		if runErr != nil {
			return fmt.Errorf("run %s: %w", info.ID, runErr)
		}
		return nil
	})
}
