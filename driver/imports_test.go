package driver_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNoForklinePackage keeps DESIGN §2: driver imports none of ours.
func TestImportsNoForklinePackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/forkline/forkline") {
			t.Errorf("driver imports %s; it must import none of forkline's packages", imp)
		}
	}
}
