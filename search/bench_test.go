package search

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// TestBenchGrepGoSource is the grep benchmark of issue 3. It is skipped
// unless PADFS_BENCH_GREP=1; run it with
//
//	PADFS_BENCH_GREP=1 go test ./search -run TestBenchGrepGoSource -v -timeout 60m
//
// It loads $(go env GOROOT)/src into a session through the mvcc API,
// builds the index (throughput, size), then times `padfs grep` (in the
// mount's process, and as a CLI process that opens the store itself)
// against GNU `grep -rn` over the mounted session, for four patterns, and
// prints the medians and the speedups.
func TestBenchGrepGoSource(t *testing.T) {
	if os.Getenv("PADFS_BENCH_GREP") == "" {
		t.Skip("set PADFS_BENCH_GREP=1 to run the grep benchmark")
	}
	src := filepath.Join(goroot(t), "src")
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateSession("gosrc", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	start := time.Now()
	files, content := loadTreeFromDisk(t, st, sid, src)
	t.Logf("loaded %d files, %.1f MB in %v", files, float64(content)/1e6, time.Since(start).Round(time.Millisecond))

	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	build := time.Since(start)
	size, _ := ix.Size(sid)
	t.Logf("index build: %v, %.1f MB/s; index %.1f MB = %.2f x content", build.Round(time.Millisecond),
		float64(content)/1e6/build.Seconds(), float64(size)/1e6, float64(size)/float64(content))
	ix.Close()
	st.Close()

	patterns := []struct {
		name string
		args []string
	}{
		{"selective literal", []string{"-rn", "MaxHeaderBytes"}},
		{"selective regex", []string{"-rn", "-E", `func \(\*Reader\) Read[A-Z][a-z]+\(`}},
		{"case-insensitive literal", []string{"-rn", "-i", "maxheaderbytes"}},
		{"no literal", []string{"-rn", "-E", `^[[:space:]]+[a-z]{2}[0-9]{2}[[:space:]]*$`}},
		// Beyond the four: no trigram and not anchored, only a
		// one-byte literal to look for.
		{"no trigram, unanchored", []string{"-rn", "-E", `[a-z]+[0-9]+_[a-z]+`}},
	}

	// The CLI, opening store and index itself (no mount running).
	bin := filepath.Join(t.TempDir(), "padfs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/padfs/padfs/cmd/padfs").CombinedOutput(); err != nil {
		t.Fatalf("build padfs: %v\n%s", err, out)
	}
	cli := map[string]time.Duration{}
	cliOut := map[string]string{}
	for _, p := range patterns {
		args := append([]string{"grep", "--data", data, "--session", sid.String()}, p.args...)
		cli[p.name], cliOut[p.name] = median(t, 11, func() string { return runCmd(t, "", bin, args...) })
	}

	// The mount: GNU grep over it, and padfs grep in its process.
	st, err = storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ix, err = OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mnt := mountSession(t, st, sid, &ix)
	fmt.Printf("\n%-26s %12s %12s %12s %9s %9s %6s\n", "pattern", "grep -rn", "padfs(mnt)", "padfs(cli)", "speedup", "(cli)", "files")
	for _, p := range patterns {
		var gnuOut string
		gnu, gnuOut := median(t, 3, func() string { o, _ := gnuGrep(t, mnt, p.args); return o })
		var stats GrepStats
		inproc, out := median(t, 11, func() string {
			var b bytes.Buffer
			req, err := parseGrepArgs(p.args)
			if err != nil {
				t.Fatal(err)
			}
			req.Session, req.Out, req.Err = sid, &b, io.Discard
			if stats, err = ix.Grep(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			return b.String()
		})
		if out != gnuOut || cliOut[p.name] != gnuOut {
			t.Errorf("%s: padfs grep output differs from grep -rn (%d/%d vs %d bytes)", p.name, len(out), len(cliOut[p.name]), len(gnuOut))
		}
		fmt.Printf("%-26s %12v %12v %12v %8.1fx %8.1fx %6d\n", p.name, gnu.Round(time.Millisecond/10),
			inproc.Round(time.Millisecond/10), cli[p.name].Round(time.Millisecond/10),
			gnu.Seconds()/inproc.Seconds(), gnu.Seconds()/cli[p.name].Seconds(), stats.Candidates)
	}
	fmt.Printf("\ncontent %.1f MB in %d files; index build %.1f MB/s; index/content %.2f\n",
		float64(content)/1e6, files, float64(content)/1e6/build.Seconds(), float64(size)/float64(content))

	// End to end, as a user runs it: the padfs binary mounts the session;
	// GNU grep -rn reads that mount; `padfs grep`, run from inside the
	// mount, goes to the mount's process over its control socket.
	ix.Close()
	st.Close()
	mnt2 := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt2, 0o755); err != nil {
		t.Fatal(err)
	}
	stopMount := startBinaryMount(t, bin, data, sid.String(), mnt2)
	defer stopMount()
	fmt.Printf("\n%-26s %12s %16s %9s   (padfs binary mount; padfs grep run in it)\n", "pattern", "grep -rn", "padfs grep", "speedup")
	for _, p := range patterns {
		gnu, gnuOut := median(t, 3, func() string { o, _ := gnuGrep(t, mnt2, p.args); return o })
		script := `cd "$1" && shift && exec "$@"`
		args := append([]string{"-c", script, "bash", mnt2, bin, "grep"}, p.args...)
		pad, padOut := median(t, 11, func() string { return runCmd(t, "", "bash", args...) })
		if padOut != gnuOut {
			t.Errorf("%s: padfs grep in the mount differs from grep -rn (%d vs %d bytes)", p.name, len(padOut), len(gnuOut))
		}
		fmt.Printf("%-26s %12v %16v %8.1fx\n", p.name, gnu.Round(time.Millisecond/10), pad.Round(time.Millisecond/10), gnu.Seconds()/pad.Seconds())
	}
}

// startBinaryMount runs `padfs mount` (the binary bin) for session sid of
// data directory data on mnt, waits until it has mounted, and returns a
// function that stops it with SIGTERM and waits for it to exit (also run
// by t.Cleanup, so the mount never outlives the test).
func startBinaryMount(t *testing.T, bin, data, sid, mnt string) func() {
	t.Helper()
	cmd := exec.Command(bin, "--data", data, "mount", "--session", sid, mnt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			go io.Copy(io.Discard, out)
			if err := cmd.Wait(); err != nil {
				t.Errorf("padfs mount: %v\n%s", err, stderr.String())
				exec.Command("umount", "-l", mnt).Run()
			}
		})
	}
	t.Cleanup(stop)
	if !strings.HasPrefix(line, "padfs: mounted") {
		stop()
		t.Fatalf("padfs mount did not mount: %q\n%s", line, stderr.String())
	}
	return stop
}

func median(t *testing.T, n int, fn func() string) (time.Duration, string) {
	var ds []time.Duration
	var out string
	for i := 0; i < n; i++ {
		s := time.Now()
		out = fn()
		ds = append(ds, time.Since(s))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2], out
}

func runCmd(t *testing.T, dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	_ = cmd.Run()
	return out.String()
}

// loadTreeFromDisk copies the regular files below dir into session sid
// (symlinks and other files are skipped).
func loadTreeFromDisk(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, dir string) (files int, bytes int64) {
	h, err := st.Header(sid)
	if err != nil {
		t.Fatal(err)
	}
	inos := map[string]mvcc.Ino{".": h.Root}
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		parent := inos[filepath.Dir(rel)]
		switch {
		case fi.IsDir():
			n, err := st.Create(sid, parent, fi.Name(), mvcc.Attr{Mode: syscall.S_IFDIR | 0o755}, "")
			if err != nil {
				return err
			}
			inos[rel] = n.Ino
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n, err := st.Create(sid, parent, fi.Name(), mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
			if err != nil {
				return err
			}
			if _, err := st.WriteContent(context.Background(), sid, n.Ino, strings.NewReader(string(data)), fi.ModTime().UnixNano()); err != nil {
				return err
			}
			files++
			bytes += int64(len(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, bytes
}

var _ = fs.Options{}
