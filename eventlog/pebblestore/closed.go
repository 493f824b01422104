package pebblestore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// closedName is the clean-close record: written by Close after its flush,
// it lists every table (number and size) the MANIFEST held then, which is
// all the log's data. It lives outside Pebble's files, so that damage to
// the MANIFEST that Pebble would take for a torn tail (and answer with an
// older version of the log) is seen: Open compares the MANIFEST with it.
// Open for writing deletes it before Pebble may change a table, so its
// absence means the last writer did not close cleanly (a crash), and then
// Pebble's own recovery rules apply.
const closedName = "FORKLINE-CLOSED"

// recloseHint says how to recover from a clean-close record that fails
// its check.
const recloseHint = "`forkline reclose` (pebblestore.Reclose) re-verifies the log without the record and rewrites it"

// closedHeader is the first line of closedName.
const closedHeader = "forkline clean close"

// table is one table of a log: its file number and size.
type table struct {
	num  uint64
	size uint64
}

// tableName is the file name of table num.
func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }

// liveTables lists the tables of db's current version.
func liveTables(db *pebble.DB) ([]table, error) {
	levels, err := db.SSTables()
	if err != nil {
		return nil, err
	}
	var out []table
	for _, level := range levels {
		for _, t := range level {
			out = append(out, table{num: uint64(t.BackingSSTNum), size: t.Size})
		}
	}
	slices.SortFunc(out, func(a, b table) int { return int(a.num) - int(b.num) })
	return slices.Compact(out), nil
}

// writeClosed writes the clean-close record of the log in dir, whose Pebble
// database was just closed, durably. It opens the database read-only to
// list its tables as its MANIFEST has them.
func writeClosed(dir string) error {
	db, err := pebble.Open(dir, &pebble.Options{
		ReadOnly: true, FS: readOnlyFS{FS: vfs.Default}, Logger: pebbleLogger{&faults{}},
		EventListener: (&faults{}).listener(), DisableTableStats: true,
	})
	if err != nil {
		return err
	}
	tables, err := liveTables(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(closedHeader + "\n")
	for _, t := range tables {
		fmt.Fprintf(&b, "%d %d\n", t.num, t.size)
	}
	fmt.Fprintf(&b, "end %d\n", len(tables))
	return writeFileSync(dir, closedName, b.Bytes())
}

// readClosed reads the clean-close record of dir; ok is false when there is
// none.
func readClosed(dir string) (tables []table, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, closedName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	bad := func(why string) error {
		return &eventlog.CorruptionError{What: "log " + dir + ": " + closedName,
			Err: fmt.Errorf("%s: the clean-close record fails its parse check; %s", why, recloseHint)}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != closedHeader {
		return nil, false, bad("no header line")
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "end" {
			if n, err := strconv.Atoi(f[1]); err != nil || n != len(tables) || sc.Scan() {
				return nil, false, bad("bad end line")
			}
			return tables, true, nil
		}
		if len(f) != 2 {
			return nil, false, bad(fmt.Sprintf("bad line %q", sc.Text()))
		}
		num, err1 := strconv.ParseUint(f[0], 10, 64)
		size, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false, bad(fmt.Sprintf("bad line %q", sc.Text()))
		}
		tables = append(tables, table{num: num, size: size})
	}
	return nil, false, bad("truncated: no end line")
}

// checkTables compares the tables of db (just opened, read-only: nothing
// changes them) with the files in dir and with the clean-close record, if
// there is one. A table that is missing, of another size than the MANIFEST
// says, or (after a clean close) that the MANIFEST lost or gained, is
// corruption naming the file.
func checkTables(db *pebble.DB, dir string) error {
	live, err := liveTables(db)
	if err != nil {
		return fmt.Errorf("pebblestore: %s: list tables: %w", dir, err)
	}
	bad := func(format string, args ...any) error {
		return &eventlog.CorruptionError{What: "log " + dir, Err: fmt.Errorf(format, args...)}
	}
	for _, t := range live {
		fi, err := os.Stat(filepath.Join(dir, tableName(t.num)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return bad("table %s is missing (the MANIFEST lists it)", tableName(t.num))
		case err != nil:
			return fmt.Errorf("pebblestore: %s: %w", dir, err)
		case uint64(fi.Size()) != t.size:
			return bad("table %s has %d bytes, the MANIFEST says %d", tableName(t.num), fi.Size(), t.size)
		}
	}
	closed, ok, err := readClosed(dir)
	if err != nil || !ok {
		return err
	}
	// The MANIFEST and the record disagree: either may be what was
	// damaged.
	bad = func(format string, args ...any) error {
		return &eventlog.CorruptionError{What: "log " + dir, Err: fmt.Errorf(format+
			" (the check of the MANIFEST against %s, the clean-close record; if the record is what was damaged, %s)",
			append(args, closedName, recloseHint)...)}
	}
	for _, t := range closed {
		i := slices.IndexFunc(live, func(l table) bool { return l.num == t.num })
		switch {
		case i < 0:
			return bad("MANIFEST: table %s of %d bytes, live at the last clean close, is not in it (a version edit was lost)",
				tableName(t.num), t.size)
		case live[i].size != t.size:
			return bad("MANIFEST: table %s has %d bytes, %d at the last clean close", tableName(t.num), live[i].size, t.size)
		}
	}
	for _, l := range live {
		if !slices.ContainsFunc(closed, func(t table) bool { return t.num == l.num }) {
			return bad("MANIFEST: table %s was not live at the last clean close", tableName(l.num))
		}
	}
	return nil
}

// removeClosed deletes the clean-close record durably, before a writer may
// change the tables.
func removeClosed(dir string) error {
	err := os.Remove(filepath.Join(dir, closedName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// writeFileSync writes dir/name through a synced temporary file renamed
// over it, then syncs dir.
func writeFileSync(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir syncs the folder dir, making a create, rename or delete in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
