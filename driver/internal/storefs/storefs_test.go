package storefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidRefAndID(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		s           string
		ref, isID   bool
		description string
	}{
		{good, true, false, "64 hex"},
		{good[:32], false, true, "32 hex"},
		{"", false, false, "empty"},
		{"..", false, false, "dotdot"},
		{"/" + good[1:], false, false, "absolute"},
		{good[:31] + "/" + good[32:], false, false, "slash"},
		{strings.ToUpper(good), false, false, "upper case"},
		{good + "0", false, false, "too long"},
		{good[:63] + "g", false, false, "not hex"},
		{good[:63] + "\x00", false, false, "NUL"},
	}
	for _, tt := range tests {
		if got := ValidRef(tt.s); got != tt.ref {
			t.Errorf("ValidRef(%s) = %v", tt.description, got)
		}
		if got := ValidID(tt.s); got != tt.isID {
			t.Errorf("ValidID(%s) = %v", tt.description, got)
		}
	}
	if id := NewID(); !ValidID(id) || id == NewID() {
		t.Errorf("NewID = %q", id)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "file")
	for _, durable := range []bool{true, false} {
		if err := WriteAtomic(tmp, dst, []byte("content"), 0o444, durable); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(dst)
		if err != nil || string(data) != "content" {
			t.Fatalf("read back %q, %v", data, err)
		}
		if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o444 {
			t.Errorf("mode %v", fi.Mode())
		}
		if des, _ := os.ReadDir(tmp); len(des) != 0 {
			t.Errorf("left %d temporary files", len(des))
		}
		if err := os.Remove(dst); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteAtomic(filepath.Join(dir, "missing"), dst, nil, 0o644, true); err == nil {
		t.Error("WriteAtomic with a missing temp dir succeeded")
	}
}
