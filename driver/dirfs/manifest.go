package dirfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// manifestHeader opens every manifest and names its format version.
const manifestHeader = "forkline.dirfs.manifest v1\n"

// Entry kinds, as written in a manifest line.
const (
	kindDir     = 'd'
	kindFile    = 'f'
	kindSymlink = 'l'
)

// entry is one line of a manifest: a directory, a regular file or a symbolic
// link, at a slash-separated path relative to the workspace root.
type entry struct {
	kind   byte
	path   string
	mode   fs.FileMode // permission bits (0o777) of a directory or file
	size   int64       // file size in bytes
	hash   [sha256.Size]byte
	target string // symlink target, stored as-is and never followed
}

// manifest is the list of a checkpoint's entries in capture order.
//
// Invariants, checked by parseManifest:
//  1. every path is local (no "..", not absolute, not empty), clean and
//     slash-separated;
//  2. no path appears twice;
//  3. the parent of every path is the root or a directory entry listed
//     earlier, so entries can be materialized in order and no entry lies
//     beneath a symbolic link;
//  4. modes are permission bits only, sizes are not negative, symlink
//     targets are not empty and contain no NUL.
type manifest []entry

// encode writes the manifest in its text format:
//
//	forkline.dirfs.manifest v1
//	d 755 "dir"
//	f 644 12 <sha256 hex> "dir/file.txt"
//	l "../target" "dir/link"
//
// Paths and targets are Go-quoted, so any byte sequence round-trips.
func (m manifest) encode() []byte {
	var b bytes.Buffer
	b.Grow(len(manifestHeader) + len(m)*100)
	b.WriteString(manifestHeader)
	var num [24]byte
	var hx [2 * sha256.Size]byte
	for i := range m {
		e := &m[i]
		b.WriteByte(e.kind)
		b.WriteByte(' ')
		switch e.kind {
		case kindDir:
			b.Write(strconv.AppendUint(num[:0], uint64(e.mode), 8))
			b.WriteByte(' ')
		case kindFile:
			b.Write(strconv.AppendUint(num[:0], uint64(e.mode), 8))
			b.WriteByte(' ')
			b.Write(strconv.AppendInt(num[:0], e.size, 10))
			b.WriteByte(' ')
			hex.Encode(hx[:], e.hash[:])
			b.Write(hx[:])
			b.WriteByte(' ')
		case kindSymlink:
			b.WriteString(strconv.Quote(e.target))
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Quote(e.path))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// errManifest classifies a manifest that does not parse or breaks an
// invariant; it is wrapped together with ErrCorrupt.
var errManifest = errors.New("malformed manifest")

// parseManifest decodes and validates a manifest. It accepts only the
// canonical encoding (what encode writes), so a manifest has one byte form.
// It never panics on any input; a bad manifest yields an error wrapping
// ErrCorrupt.
func parseManifest(data []byte) (manifest, error) {
	if !bytes.HasPrefix(data, []byte(manifestHeader)) {
		return nil, fmt.Errorf("%w: %w: missing header", ErrCorrupt, errManifest)
	}
	rest := string(data[len(manifestHeader):])
	var m manifest
	dirs := map[string]bool{".": true}
	seen := map[string]bool{}
	for lineNo := 2; rest != ""; lineNo++ {
		line, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return nil, fmt.Errorf("%w: %w: line %d: no final newline", ErrCorrupt, errManifest, lineNo)
		}
		rest = after
		e, err := parseEntry(line)
		if err != nil {
			return nil, fmt.Errorf("%w: %w: line %d: %v", ErrCorrupt, errManifest, lineNo, err)
		}
		if seen[e.path] {
			return nil, fmt.Errorf("%w: %w: line %d: duplicate path %q", ErrCorrupt, errManifest, lineNo, e.path)
		}
		if !dirs[path.Dir(e.path)] {
			return nil, fmt.Errorf("%w: %w: line %d: parent of %q is not a directory listed before it", ErrCorrupt, errManifest, lineNo, e.path)
		}
		seen[e.path] = true
		if e.kind == kindDir {
			dirs[e.path] = true
		}
		m = append(m, e)
	}
	return m, nil
}

// parseEntry decodes one manifest line.
func parseEntry(line string) (entry, error) {
	var e entry
	if len(line) < 2 || line[1] != ' ' {
		return e, errors.New("bad entry")
	}
	e.kind = line[0]
	s := line[2:]
	var err error
	switch e.kind {
	case kindDir:
		if e.mode, s, err = parseMode(s); err != nil {
			return e, err
		}
	case kindFile:
		if e.mode, s, err = parseMode(s); err != nil {
			return e, err
		}
		field, r, ok := strings.Cut(s, " ")
		if !ok {
			return e, errors.New("missing size")
		}
		e.size, err = strconv.ParseInt(field, 10, 64)
		if err != nil || e.size < 0 || strconv.FormatInt(e.size, 10) != field {
			return e, fmt.Errorf("bad size %q", field)
		}
		field, s, ok = strings.Cut(r, " ")
		if !ok || len(field) != 2*sha256.Size {
			return e, errors.New("bad hash")
		}
		if _, err := hex.Decode(e.hash[:], []byte(field)); err != nil || strings.ToLower(field) != field {
			return e, fmt.Errorf("bad hash %q", field)
		}
	case kindSymlink:
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return e, errors.New("bad symlink target")
		}
		e.target, _ = strconv.Unquote(q)
		if e.target == "" || strconv.Quote(e.target) != q || strings.IndexByte(e.target, 0) >= 0 {
			return e, errors.New("bad symlink target")
		}
		s = s[len(q):]
		if !strings.HasPrefix(s, " ") {
			return e, errors.New("missing path")
		}
		s = s[1:]
	default:
		return e, fmt.Errorf("unknown kind %q", e.kind)
	}
	q, err := strconv.QuotedPrefix(s)
	if err != nil || len(q) != len(s) {
		return e, errors.New("bad path")
	}
	e.path, _ = strconv.Unquote(q)
	if !validPath(e.path) || strconv.Quote(e.path) != q {
		return e, fmt.Errorf("bad path %q", e.path)
	}
	return e, nil
}

// parseMode parses an octal permission field followed by a space.
func parseMode(s string) (fs.FileMode, string, error) {
	field, rest, ok := strings.Cut(s, " ")
	if !ok {
		return 0, "", errors.New("missing mode")
	}
	v, err := strconv.ParseUint(field, 8, 32)
	if err != nil || v > uint64(fs.ModePerm) || strconv.FormatUint(v, 8) != field {
		return 0, "", fmt.Errorf("bad mode %q", field)
	}
	return fs.FileMode(v), rest, nil
}

// validPath reports whether p is a clean, local, slash-separated path that
// names something below the root (not the root itself): no empty, "." or
// ".." element, no leading or trailing slash, no NUL. Unlike fs.ValidPath it
// accepts names that are not UTF-8, which Unix file systems allow.
func validPath(p string) bool {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}
