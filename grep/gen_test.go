package grep

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPosixClassesGenerated: go generate (go run ./gen) reproduces
// posix_classes.go byte for byte, so the file is what its generator
// says. The classes come from the machine's GNU grep and glibc, which the
// header names: on a machine with other versions the test skips, naming
// both.
func TestPosixClassesGenerated(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool in PATH")
	}
	out := filepath.Join(t.TempDir(), "posix_classes.go")
	cmd := exec.Command("go", "run", "./gen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("posix_classes.go")
	if err != nil {
		t.Fatal(err)
	}
	header := func(b []byte) []byte { h, _, _ := bytes.Cut(b, []byte("\n")); return h }
	if !bytes.Equal(header(got), header(want)) {
		t.Skipf("posix_classes.go says %q; this machine's tools give %q", header(want), header(got))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("go generate ./grep changes posix_classes.go (%d bytes, was %d): run it and review the diff", len(got), len(want))
	}
}
