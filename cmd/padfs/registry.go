package main

// The mount registry lets a command run inside a mount find that mount's
// data directory without --data: a running mount records its data
// directory in a small file named after its mountpoint, in a private
// per-user directory ($XDG_RUNTIME_DIR/padfs/mounts, else
// $TMPDIR/padfs-UID/mounts, mode 0700), and removes it on exit. A stale
// record (kill -9) is harmless: it is only consulted for a path that is a
// live fuse.padfs mount, and the control socket then has to answer.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func mountRegistryDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "padfs", "mounts")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("padfs-%d", os.Getuid()), "mounts")
}

func registryFile(mnt string) string {
	sum := sha256.Sum256([]byte(mnt))
	return filepath.Join(mountRegistryDir(), hex.EncodeToString(sum[:16]))
}

// privateDir reports whether dir and its parent are directories owned by
// us and closed to others (so nobody else can plant a record).
func privateDir(dir string) bool {
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
			return false
		}
		if d == dir && fi.Mode().Perm()&0o077 != 0 {
			return false
		}
	}
	return true
}

// registerMount records that mnt serves data directory data; the returned
// function removes the record. Failing to record is not fatal (commands
// then need --data inside the mount); the error says why.
func registerMount(mnt, data string) (func(), error) {
	dir := mountRegistryDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}, err
	}
	if !privateDir(dir) {
		return func() {}, fmt.Errorf("mount registry %s is not a private directory of uid %d", dir, os.Getuid())
	}
	f := registryFile(mnt)
	tmp := fmt.Sprintf("%s.%d.tmp", f, os.Getpid())
	if err := os.WriteFile(tmp, []byte(data+"\n"+mnt+"\n"), 0o600); err != nil {
		return func() {}, err
	}
	if err := os.Rename(tmp, f); err != nil {
		os.Remove(tmp)
		return func() {}, err
	}
	return func() {
		// Remove only our own record (a later mount may have replaced it).
		if b, err := os.ReadFile(f); err == nil && string(b) == data+"\n"+mnt+"\n" {
			os.Remove(f)
		}
	}, nil
}

// mountDataDir returns the data directory of the padfs mount that holds
// path, if path is inside one and that mount recorded itself.
func mountDataDir(path string) (string, bool) {
	mnt, ok := padfsMountOf(path)
	if !ok || !privateDir(mountRegistryDir()) {
		return "", false
	}
	b, err := os.ReadFile(registryFile(mnt))
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || lines[1] != mnt || !filepath.IsAbs(lines[0]) {
		return "", false
	}
	return lines[0], true
}

// padfsMountOf returns the innermost fuse.padfs mountpoint at or above path.
func padfsMountOf(path string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	best := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		fstype := ""
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) {
				fstype = fields[i+1]
				break
			}
		}
		if fstype != "fuse.padfs" {
			continue
		}
		mnt := unescapeMountinfo(fields[4])
		if _, in := under(mnt, path); in && len(mnt) > len(best) {
			best = mnt
		}
	}
	return best, best != ""
}
