package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
)

// Arguments and the working directory are bytes: a path that is not valid
// UTF-8 crosses the control socket exactly (JSON would turn it into U+FFFD).
func TestForwardNonUTF8ArgvAndCwd(t *testing.T) {
	dir, _ := startCtl(t)
	var o, e bytes.Buffer
	code, ok, err := forward(context.Background(), dir, []string{"--data", dir, "ctltest", "a\xfeb", "\xff"}, "/x/\xfd",
		strings.NewReader(""), &o, &e)
	if err != nil || !ok || code != 0 {
		t.Fatalf("forward: code %d ok %v err %v stderr %q", code, ok, err, e.String())
	}
	if want := fmt.Sprintf("where=mount:/fake args=a\xfeb,\xff cwd=/x/\xfd uid=%d\n", os.Getuid()); o.String() != want {
		t.Errorf("out %q, want %q", o.String(), want)
	}
}

// A request of an older client (no _b64 fields) still decodes; a new
// request keeps the plain fields an older server reads.
func TestRequestCompat(t *testing.T) {
	req, err := decodeRequest([]byte(`{"v":1,"op":"run","argv":["log","x"],"cwd":"/tmp"}`))
	if err != nil || req.Op != "run" || !slices.Equal(req.Argv, []string{"log", "x"}) || req.Cwd != "/tmp" {
		t.Fatalf("old request: %+v %v", req, err)
	}
	if p := string(encodeRequest("run", []string{"log", "x"}, "/tmp")); p != `{"v":1,"op":"run","argv":["log","x"],"cwd":"/tmp"}` {
		t.Errorf("valid UTF-8 request %s, want the version-1 form unchanged", p)
	}
	p := string(encodeRequest("run", []string{"log", "\xff"}, "/t\xfe"))
	if !strings.Contains(p, `"argv":["log","\ufffd"]`) || !strings.Contains(p, `"argv_b64":["bG9n","/w=="]`) || !strings.Contains(p, `"cwd_b64":"L3T+"`) {
		t.Errorf("request %s lacks the plain fields or their _b64 siblings", p)
	}
	if _, err := decodeRequest([]byte(`{"v":1,"op":"run","argv":["a"],"argv_b64":["YQ==","Yg=="]}`)); err == nil {
		t.Error("argv_b64 longer than argv accepted")
	}
}

// FuzzDecodeRequest: no payload makes the server panic, and what it
// accepts survives a re-encoding exactly.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"v":1,"op":"run","argv":["log","x"],"cwd":"/tmp"}`))
	f.Add(encodeRequest("run", []string{"grep", "-rn", "a\xfeb"}, "/m/\xfd"))
	f.Add(encodeRequest("info", nil, ""))
	f.Add([]byte(`{"v":1,"argv_b64":["!!"]}`))
	f.Add([]byte(`{"v":1,"cwd_b64":"=="}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		req, err := decodeRequest(p)
		if err != nil {
			return
		}
		again, err := decodeRequest(encodeRequest(req.Op, req.Argv, req.Cwd))
		if err != nil {
			t.Fatalf("re-encoded %+v: %v", req, err)
		}
		if again.Op != req.Op || !slices.Equal(again.Argv, req.Argv) || again.Cwd != req.Cwd {
			t.Fatalf("%+v came back as %+v", req, again)
		}
	})
}

// The mount's answer to "info" keeps the bytes of its mountpoint and data
// directory, which commands use to map a caller's cwd into the session.
func TestQueryMountNonUTF8(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "d\xfe")
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := MountInfo{Mountpoint: "/m/\xff", Pid: os.Getpid(), Data: dir}
	srv, err := listenCtl(App{Dir: dir, Store: st, Mount: &want}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	got, err := queryMount(dir)
	if err != nil || *got != want {
		t.Fatalf("queryMount = %+v, %v; want %+v", got, err, want)
	}
}
