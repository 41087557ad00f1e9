package fs

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"context"
	"github.com/padfs/padfs/mvcc"
)

// One open of a virtual file generates it once (not at lookup and again
// at open), and cat, tail and jq see the whole content; stat and reads
// racing each other are safe.
func TestVirtualGeneratedOncePerOpen(t *testing.T) {
	var calls atomic.Int64
	vd := VirtualDir{Open: func(_ context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
		if name == "missing" {
			return nil, fmt.Errorf("%w: %s", mvcc.ErrNotFound, name)
		}
		n := calls.Add(1)
		return []byte(fmt.Sprintf("{\"n\": %d, \"pad\": %q}\nlast line\n", n, strings.Repeat("p", 5000))), nil
	}}
	mnt, _, _ := mountTestOpts(t, Options{Virtual: map[string]VirtualDir{".grep": vd}})
	for _, c := range []struct{ cmd, want string }{
		{"cat .grep/x | tail -n 1", "last line\n"},
		{"tail -n 1 .grep/x", "last line\n"},
		{"head -n 1 .grep/x | jq -c .n", ""},
	} {
		before := calls.Load()
		out := sh(t, mnt, c.cmd)
		if got := calls.Load() - before; got != 1 {
			t.Errorf("%s generated the file %d times, want 1", c.cmd, got)
		}
		if c.want != "" && out != c.want {
			t.Errorf("%s: %q, want %q", c.cmd, out, c.want)
		}
		if c.want == "" && strings.TrimSpace(out) != fmt.Sprint(calls.Load()) {
			t.Errorf("%s: %q, want the content of the open (%d)", c.cmd, out, calls.Load())
		}
	}
	if out, err := shErr(mnt, "cat .grep/missing"); err == nil {
		t.Errorf("cat of a file Open says is missing: %q", out)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shErr(mnt, "for i in 1 2 3 4 5; do stat .grep/x >/dev/null; cat .grep/x >/dev/null; done")
		}()
	}
	wg.Wait()
}
