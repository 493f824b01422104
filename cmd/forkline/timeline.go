package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/webui"
)

func cmdTimeline(e *env, idArg, file string) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		if err := checkTarget("timeline", file); err != nil {
			return err
		}
		if fi, err := os.Stat(filepath.Dir(file)); err != nil || !fi.IsDir() {
			return inputErrorf("timeline: folder %s does not exist", filepath.Dir(file))
		}
		l, err := readLineage(e, s, info, 0)
		if err != nil {
			return err
		}
		if err := writeTimelineFile(e, s, file, l); err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "html": file, "events": info.Head})
		}
		fmt.Fprintf(e.stdout, "wrote %s: the timeline of %s (%d events); open it in a browser\n", file, info.ID, info.Head)
		return nil
	})
}

// writeTimelineFile renders l's timeline, with the forks of it that log
// holds, into file (written whole, then renamed into place).
func writeTimelineFile(e *env, log eventlog.Log, file string, l *lineage) error {
	var forks []webui.Fork
	for info, err := range log.List(e.ctx, eventlog.Filter{}) {
		if err != nil {
			return fmt.Errorf("list executions: %w", err)
		}
		if info.Parent != l.info.ID {
			continue
		}
		f := webui.Fork{Info: info}
		for ev, err := range log.Events(e.ctx, info.ID, info.ForkSeq+1) {
			if err != nil {
				return fmt.Errorf("execution %s: %w", info.ID, err)
			}
			f.Own = append(f.Own, ev)
		}
		forks = append(forks, f)
	}
	var buf bytes.Buffer
	if err := webui.WriteTimeline(&buf, l.info, l.events, forks); err != nil {
		return err
	}
	return writePage("timeline", file, buf.Bytes())
}

// writePage writes an HTML page of command cmd into file: to a new file in
// the same folder, renamed over file once whole.
func writePage(cmd, file string, page []byte) error {
	// Checked again just before the rename: the file may have changed.
	if err := checkTarget(cmd, file); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(page)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// checkTarget refuses, for command cmd, a page file that exists and is not a regular
// file: a folder, a device such as /dev/full, a symlink (never followed nor
// replaced: give the path it points to), a pipe. The page is written to a
// new file in the same folder and renamed over the target, which would
// replace any of those.
func checkTarget(cmd, file string) error {
	fi, err := os.Lstat(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", cmd, err)
	case fi.IsDir():
		return inputErrorf("%s: %s is a folder", cmd, file)
	case fi.Mode()&os.ModeSymlink != 0:
		return inputErrorf("%s: %s is a symlink; give the file it points to, or a new file", cmd, file)
	case !fi.Mode().IsRegular():
		return inputErrorf("%s: %s is not a regular file (%s); give a new file or a regular one", cmd, file, fi.Mode().Type())
	}
	return nil
}
