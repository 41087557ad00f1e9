package compressed

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func gz(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zst(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func find(data []byte, name, needle string, lim Limits) Result {
	f := Sniff(data[:min(len(data), HeadSize)], name)
	return Find(bytes.NewReader(data), int64(len(data)), f, []byte(needle), lim)
}

func TestFindFormats(t *testing.T) {
	secret := "sk-live-0123456789"
	// The needle straddles the search's 64 KiB blocks.
	plain := append(bytes.Repeat([]byte("a"), 64<<10-5), []byte(secret+" tail")...)

	var zl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	zw.Write(append([]byte("blob 123\x00"), plain...))
	zw.Close()

	var zb bytes.Buffer
	w := zip.NewWriter(&zb)
	f, _ := w.Create("dir/inner.txt.gz")
	f.Write(gz(t, plain))
	w.Close()

	for _, c := range []struct {
		name, file, format string
		data               []byte
	}{
		{"gzip", "x.gz", Gzip, gz(t, plain)},
		{"gzip in gzip", "x.gz.gz", Gzip, gz(t, gz(t, plain))},
		{"loose object", strings.Repeat("ab", 19), GitObject, zl.Bytes()},
		{"zlib", "data.z", Zlib, zl.Bytes()},
		{"zip with a gzip entry", "a.zip", Zip, zb.Bytes()},
		{"zstd", "x.zst", Zstd, zst(t, plain)},
		{"gzip in zstd", "x.gz.zst", Zstd, zst(t, gz(t, plain))},
	} {
		r := find(c.data, c.file, secret, DefaultLimits)
		if r.Format != c.format || !r.Found || r.Err != nil {
			t.Errorf("%s: %+v, want %s found", c.name, r, c.format)
		}
		if r := find(c.data, c.file, "not-in-there", DefaultLimits); r.Found || r.Err != nil {
			t.Errorf("%s: absent needle: %+v", c.name, r)
		}
	}
}

func TestFindCorruptIsNotInspected(t *testing.T) {
	data := gz(t, bytes.Repeat([]byte("some text "), 10000))
	r := find(data[:len(data)/2], "x.gz", "secret-text", DefaultLimits)
	if r.Found || r.Err == nil {
		t.Fatalf("truncated gzip: %+v, want an error", r)
	}
	bad := append([]byte(nil), data...)
	for i := 20; i < len(bad); i += 7 {
		bad[i] ^= 0x55
	}
	if r := find(bad, "x.gz", "secret-text", DefaultLimits); r.Found || r.Err == nil {
		t.Fatalf("corrupt gzip: %+v, want an error", r)
	}
}

func TestFindBombIsBounded(t *testing.T) {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for i := 0; i < 64; i++ { // 64 MiB of zeros in about 64 KiB
		w.Write(zeros)
	}
	w.Write([]byte("secret-text"))
	w.Close()
	r := find(b.Bytes(), "bomb.gz", "secret-text", Limits{MaxOutput: 1 << 20, MaxDepth: 2})
	if r.Found || !errors.Is(r.Err, ErrLimit) {
		t.Fatalf("bomb: %+v, want ErrLimit", r)
	}
	if r := find(b.Bytes(), "bomb.gz", "secret-text", DefaultLimits); !r.Found {
		t.Fatalf("within the limit: %+v, want found", r)
	}
}

// A pack written by git itself: the secret is found in a blob and in a
// delta's insertion.
func TestFindGitPack(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	body := strings.Repeat("line of ordinary text\n", 500)
	os.WriteFile(filepath.Join(dir, "f"), []byte(body), 0o644)
	run("add", "f")
	run("commit", "-qm", "one")
	os.WriteFile(filepath.Join(dir, "f"), []byte(body+"token=sk-live-777\n"), 0o644)
	run("commit", "-qam", "two")
	run("gc", "-q", "--aggressive")
	packs, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("sk-live-777")) {
		t.Fatal("the secret is stored uncompressed: test proves nothing")
	}
	if r := find(data, "x.pack", "sk-live-777", DefaultLimits); r.Format != GitPack || !r.Found {
		t.Fatalf("pack: %+v, want found", r)
	}
	if r := find(data, "x.pack", "sk-live-888", DefaultLimits); r.Found || r.Err != nil {
		t.Fatalf("pack, absent needle: %+v", r)
	}
	if r := find(data[:len(data)/2], "x.pack", "sk-live-888", DefaultLimits); r.Found || r.Err == nil {
		t.Fatalf("truncated pack: %+v, want an error", r)
	}
}

func FuzzFind(f *testing.F) {
	f.Add(gz(f, []byte("hello secret-text")), "x.gz")
	var zl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	zw.Write([]byte("blob 5\x00secret-text"))
	zw.Close()
	f.Add(zl.Bytes(), strings.Repeat("0", 38))
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01\x35"), "p.pack")
	var zb bytes.Buffer
	w := zip.NewWriter(&zb)
	e, _ := w.Create("a")
	e.Write([]byte("secret-text"))
	w.Close()
	f.Add(zb.Bytes(), "a.zip")
	f.Add([]byte("BZh91AY&SY\x00\x00"), "b.bz2")
	f.Add(zst(f, []byte("zstd secret-text")), "z.zst")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		format := Sniff(data[:min(len(data), HeadSize)], name)
		if format == "" {
			return
		}
		lim := Limits{MaxOutput: 1 << 20, MaxDepth: 2}
		r := Find(bytes.NewReader(data), int64(len(data)), format, []byte("secret-text"), lim)
		if r.Found && r.Err != nil {
			t.Fatalf("found with an error: %+v", r)
		}
		if r.Err != nil && strings.Contains(r.Err.Error(), "panic") {
			t.Fatalf("decoder panicked: %v", r.Err)
		}
	})
}

// A zstd frame declaring a 1 TiB window is refused before its window is
// allocated.
func TestFindZstdWindowBounded(t *testing.T) {
	frame := []byte("\x28\xb5\x2f\xfd\x00\xf0\x01\x00\x00secret-text")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := find(frame, "x.zst", "secret-text", DefaultLimits)
	runtime.ReadMemStats(&after)
	if r.Format != Zstd || r.Found || r.Err == nil {
		t.Fatalf("huge window: %+v, want an error", r)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 100<<20 {
		t.Fatalf("inspecting a %d-byte frame allocated %d MiB", len(frame), grew>>20)
	}
}
