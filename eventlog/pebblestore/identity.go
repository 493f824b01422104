package pebblestore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// identityName is the file that names a log folder independently of its
// path (DESIGN §15½.2), so that a folder moved on its host keeps its
// identity: the kernel that holds it is the same owner of its executions.
const identityName = "FORKLINE-ID"

// Identity is what a log folder says about itself, written into it once.
type Identity struct {
	// ID is 32 random hex digits, written (synced) when the folder was
	// created, or, for a folder created by a build without identities, at
	// its first writable open by a build with them.
	ID string
	// FormerPath is set only for a folder that got its ID that way: its
	// absolute path at that open, which is what the owner names of its
	// older executions were made of (sdk.LocalOwner used host and path).
	FormerPath string
}

// ReadIdentity returns the identity of the log folder dir. A folder without
// one — not a log, or a log made before identities that no writable open
// has given one yet (a read-only open never writes) — gives an error
// wrapping fs.ErrNotExist. A file whose ID is not 32 hex digits gives
// another error; Open reports it too and never rewrites the file.
func ReadIdentity(dir string) (Identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, identityName))
	if err != nil {
		return Identity{}, fmt.Errorf("pebblestore: identity of %s: %w", dir, err)
	}
	var id Identity
	for line := range strings.Lines(string(b)) {
		key, val, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch key {
		case "id":
			id.ID = val
		case "former-path":
			id.FormerPath = val
		}
	}
	if len(id.ID) != 32 || strings.Trim(id.ID, "0123456789abcdef") != "" {
		return Identity{}, fmt.Errorf("pebblestore: identity of %s: %w", dir, errBadIdentity)
	}
	return id, nil
}

// errBadIdentity is the error of an identity file whose ID is not 32 hex
// digits.
var errBadIdentity = errors.New(identityName + " holds no valid id (want 32 hex digits)")

// ensureIdentity gives the log folder dir its identity if it has none: a
// new ID, and, for a folder that held a log before (existing), its
// absolute path as FormerPath. The file is written synced, through a
// rename, so a crash leaves it whole or absent.
func ensureIdentity(dir string, existing bool) error {
	_, err := ReadIdentity(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return fmt.Errorf("pebblestore: identity of %s: %w", dir, err)
	}
	text := "id " + hex.EncodeToString(r[:]) + "\n"
	if existing {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("pebblestore: identity of %s: %w", dir, err)
		}
		text += "former-path " + abs + "\n"
	}
	if err := writeFileSync(dir, identityName, []byte(text)); err != nil {
		return fmt.Errorf("pebblestore: write %s: %w", identityName, err)
	}
	return nil
}
