package serveapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// AdvertFile is the name of the advertisement in a data folder.
const AdvertFile = "serve.json"

// Advert says which process serves a data folder's log, and where.
type Advert struct {
	URL     string    `json:"url"`   // the API's base, say http://127.0.0.1:7070/
	PID     int       `json:"pid"`   // the serving process, for messages
	Token   string    `json:"token"` // the secret its requests present (Authorization: Bearer)
	Started time.Time `json:"started"`
}

// NewToken returns a fresh random token for an Advert.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("serveapi: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// WriteAdvert writes a into data folder dir, replacing any older one
// atomically (a reader sees the old file or the new one, never a part).
func WriteAdvert(dir string, a Advert) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("serveapi: advert: %w", err)
	}
	tmp, err := os.CreateTemp(dir, AdvertFile+".*")
	if err != nil {
		return fmt.Errorf("serveapi: advert: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, AdvertFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("serveapi: advert: %w", err)
	}
	return nil
}

// ReadAdvert reads the advert of data folder dir; ok is false when there
// is none. A file that is not an advert is an error.
func ReadAdvert(dir string) (a Advert, ok bool, err error) {
	p := filepath.Join(dir, AdvertFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Advert{}, false, nil
	}
	if err != nil {
		return Advert{}, false, fmt.Errorf("serveapi: %w", err)
	}
	if err := json.Unmarshal(b, &a); err != nil || a.URL == "" {
		return Advert{}, false, fmt.Errorf("serveapi: %s is not an advert of a serving process (want JSON with a url)", p)
	}
	return a, true, nil
}

// RemoveAdvert removes the advert of dir if it is still the one with
// token: a newer server's advert stays.
func RemoveAdvert(dir, token string) error {
	a, ok, err := ReadAdvert(dir)
	if err != nil || !ok || a.Token != token {
		return err
	}
	if err := os.Remove(filepath.Join(dir, AdvertFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("serveapi: %w", err)
	}
	return nil
}
