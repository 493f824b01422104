package serveapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An advert round-trips; RemoveAdvert leaves a newer server's advert; a
// file that is not an advert is an error, none is not.
func TestAdvert(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadAdvert(dir); ok || err != nil {
		t.Fatalf("ReadAdvert of a folder without one: %v, %v", ok, err)
	}
	a := Advert{URL: "http://127.0.0.1:1/", PID: 7, Token: "t1", Started: time.Unix(1, 0).UTC()}
	if err := WriteAdvert(dir, a); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadAdvert(dir)
	if err != nil || !ok || got != a {
		t.Fatalf("ReadAdvert = %+v, %v, %v; want %+v", got, ok, err, a)
	}
	if err := RemoveAdvert(dir, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadAdvert(dir); !ok {
		t.Fatal("RemoveAdvert with another token removed the advert")
	}
	if err := RemoveAdvert(dir, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadAdvert(dir); ok {
		t.Fatal("RemoveAdvert with its token left the advert")
	}
	if err := os.WriteFile(filepath.Join(dir, AdvertFile), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAdvert(dir); err == nil || !strings.Contains(err.Error(), "not an advert") {
		t.Fatalf("ReadAdvert of a foreign file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("WriteAdvert left temporary files: %v", entries)
	}
}
