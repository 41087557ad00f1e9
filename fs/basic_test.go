package fs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBasicWriteRead(t *testing.T) {
	mnt, _, _ := mountTest(t)
	p := filepath.Join(mnt, "hello.txt")
	if err := os.WriteFile(p, []byte("hello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "hello world\n" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Join(mnt, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := sh(t, mnt, "ls -la; ls -la .asof | head -3; cat hello.txt")
	t.Log(out)
}
