package dirfs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTrusted(t *testing.T) {
	scan := time.Unix(1000, 0)
	sec := int64(time.Second)
	at := func(s float64) int64 { return int64(s * float64(sec)) }
	tests := []struct {
		name         string
		mtime, ctime int64
		window       time.Duration
		want         bool
	}{
		{"old file", at(900), at(900), 2 * time.Second, true},
		{"mtime within window", at(999), at(900), 2 * time.Second, false},
		{"ctime within window", at(900), at(998.5), 2 * time.Second, false},
		{"exactly at the limit", at(998), at(900), 2 * time.Second, false},
		{"just before the limit", at(998) - 1, at(998) - 1, 2 * time.Second, true},
		{"mtime in the future", at(2000), at(900), 2 * time.Second, false},
		{"zero window, same instant", at(1000), at(1000), 0, false},
		{"zero window, before", at(1000) - 1, at(1000) - 1, 0, true},
	}
	for _, tt := range tests {
		if got := trusted(statKey{mtime: tt.mtime, ctime: tt.ctime}, scan, tt.window); got != tt.want {
			t.Errorf("%s: trusted = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := manifest{
		{kind: kindDir, path: "a", mode: 0o755},
		{kind: kindDir, path: "a/empty dir", mode: 0o700},
		{kind: kindFile, path: "a/x.txt", mode: 0o644, size: 3, hash: sha256.Sum256([]byte("abc"))},
		{kind: kindFile, path: "quote\"and\nnewline", mode: 0o600, size: 0, hash: sha256.Sum256(nil)},
		{kind: kindSymlink, path: "a/link", target: "../../../etc/passwd"},
		{kind: kindSymlink, path: "ünïcode \xff", target: "x y\tz"},
	}
	data := m.encode()
	got, err := parseManifest(data)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, data)
	}
	if len(got) != len(m) {
		t.Fatalf("got %d entries, want %d", len(got), len(m))
	}
	for i := range m {
		if got[i] != m[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], m[i])
		}
	}
	if !bytes.Equal(got.encode(), data) {
		t.Error("re-encoding differs")
	}
}

func TestParseManifestRejects(t *testing.T) {
	h := strings.Repeat("ab", 32)
	tests := []struct{ name, body string }{
		{"no header", "d 755 \"a\"\n"},
		{"wrong version", "forkline.dirfs.manifest v2\n"},
		{"unknown kind", manifestHeader + "x 755 \"a\"\n"},
		{"no final newline", manifestHeader + "d 755 \"a\""},
		{"dotdot", manifestHeader + "d 755 \"..\"\n"},
		{"climbing", manifestHeader + "d 755 \"a\"\nf 644 1 " + h + " \"a/../../x\"\n"},
		{"absolute", manifestHeader + "f 644 1 " + h + " \"/etc/passwd\"\n"},
		{"root", manifestHeader + "d 755 \".\"\n"},
		{"empty path", manifestHeader + "d 755 \"\"\n"},
		{"unquoted path", manifestHeader + "d 755 a\n"},
		{"trailing junk", manifestHeader + "d 755 \"a\" x\n"},
		{"parent missing", manifestHeader + "f 644 1 " + h + " \"a/x\"\n"},
		{"parent is a file", manifestHeader + "f 644 1 " + h + " \"a\"\nf 644 1 " + h + " \"a/x\"\n"},
		{"beneath a symlink", manifestHeader + "l \"/etc\" \"a\"\nf 644 1 " + h + " \"a/passwd\"\n"},
		{"duplicate", manifestHeader + "d 755 \"a\"\nd 755 \"a\"\n"},
		{"mode too big", manifestHeader + "d 7777 \"a\"\n"},
		{"negative size", manifestHeader + "f 644 -1 " + h + " \"a\"\n"},
		{"short hash", manifestHeader + "f 644 1 abcd \"a\"\n"},
		{"upper-case hash", manifestHeader + "f 644 1 " + strings.ToUpper(h) + " \"a\"\n"},
		{"empty link target", manifestHeader + "l \"\" \"a\"\n"},
		{"NUL in link target", manifestHeader + "l \"a\\x00b\" \"a\"\n"},
		{"NUL in path", manifestHeader + "d 755 \"a\\x00b\"\n"},
	}
	for _, tt := range tests {
		_, err := parseManifest([]byte(tt.body))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", tt.name, err)
		}
	}
}

// FuzzParseManifest: no input makes the parser panic, and whatever it
// accepts re-encodes to the same bytes and keeps the invariants.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(manifestHeader))
	f.Add(manifest{
		{kind: kindDir, path: "a", mode: 0o755},
		{kind: kindFile, path: "a/b", mode: 0o644, size: 3, hash: sha256.Sum256([]byte("abc"))},
		{kind: kindSymlink, path: "c", target: "a/b"},
	}.encode())
	f.Add([]byte(manifestHeader + "d 755 \"a\"\nl \"x\" \"a/l\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(m.encode(), data) {
			t.Fatalf("accepted manifest does not re-encode to its bytes:\n%q\n%q", data, m.encode())
		}
		for _, e := range m {
			if !validPath(e.path) {
				t.Fatalf("accepted invalid path %q", e.path)
			}
		}
	})
}
