package fs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Parallel writers, readers, renames, unlinks and flushes on one mount
// (meant for -race).
func TestParallel(t *testing.T) {
	mnt, _, m := mountTest(t)
	shared := filepath.Join(mnt, "shared")
	os.WriteFile(shared, nil, 0o644)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dir := filepath.Join(mnt, fmt.Sprintf("w%d", w))
			if err := os.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			f, err := os.OpenFile(shared, os.O_RDWR, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := 0; i < 40; i++ {
				p := filepath.Join(dir, fmt.Sprintf("f%d", i))
				data := bytes.Repeat([]byte{byte('a' + w)}, 1000*(i+1))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					errs <- err
					return
				}
				if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
					errs <- fmt.Errorf("%s: read %d bytes, %v", p, len(got), err)
					return
				}
				// Each worker owns a 100-byte slot of the shared file.
				if _, err := f.WriteAt(bytes.Repeat([]byte{byte('0' + w)}, 100), int64(w*100)); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if err := os.Rename(p, p+".renamed"); err != nil {
						errs <- err
						return
					}
				} else if i%3 == 1 {
					if err := os.Remove(p); err != nil {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			if err := m.Flush(); err != nil {
				errs <- err
			}
			if _, err := os.ReadDir(filepath.Join(mnt, ".asof")); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, _ := os.ReadFile(shared)
	want := []byte{}
	for w := 0; w < 4; w++ {
		want = append(want, bytes.Repeat([]byte{byte('0' + w)}, 100)...)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("shared file: %q", got)
	}
	if out := sh(t, mnt, "find w* -type f | wc -l"); out != fmt.Sprintf("%d\n", 4*27) {
		t.Errorf("files left: %s", out)
	}
}
