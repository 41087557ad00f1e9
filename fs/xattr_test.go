package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// xattrTool returns the commands that set, remove and dump user.*
// attributes: attr(5)'s setfattr/getfattr when installed, else the same
// system calls from python3.
func xattrTool(t *testing.T) (set func(file, name, val string) string, rm func(file, name string) string, dump func(file string) string) {
	t.Helper()
	if _, err := exec.LookPath("setfattr"); err == nil {
		if _, err := exec.LookPath("getfattr"); err == nil {
			return func(f, n, v string) string { return "setfattr -n " + n + " -v " + v + " " + f },
				func(f, n string) string { return "setfattr -x " + n + " " + f },
				func(f string) string { return "getfattr -d --absolute-names " + f }
		}
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("neither setfattr/getfattr nor python3 installed")
	}
	py := func(code string) string { return "python3 -c '" + code + "'" }
	return func(f, n, v string) string {
			return py("import os,sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())") + " " + f + " " + n + " " + v
		}, func(f, n string) string {
			return py("import os,sys; os.removexattr(sys.argv[1], sys.argv[2])") + " " + f + " " + n
		}, func(f string) string {
			return py(`import os,sys
f=sys.argv[1]; ns=sorted(os.listxattr(f))
if ns: print("# file: "+f); [print("%s=\"%s\"" % (n, os.getxattr(f,n).decode())) for n in ns]; print()`) + " " + f
		}
}

// Issue 8 item 13: attributes have version chains of their own; a view
// under .asof/ reads the set as of its time through getxattr/listxattr.
func TestXattrsThroughAsof(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	mnt, st, _ := mountTest(t)
	set, rm, dump := xattrTool(t)
	sh(t, mnt, "echo data > f && "+set("f", "user.a", "one")+" && "+set("f", "user.big", strings.Repeat("x", 3000)))
	t1, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	want1 := sh(t, mnt, dump("f"))
	if !strings.Contains(want1, `user.a="one"`) {
		t.Fatalf("live set after setfattr:\n%s", want1)
	}
	sh(t, mnt, set("f", "user.a", "two")+" && "+set("f", "user.b", "bee")+" && "+rm("f", "user.big")+" && echo more >> f")
	t2, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	want2 := "# file: f\nuser.a=\"two\"\nuser.b=\"bee\"\n\n"
	if got := sh(t, mnt, dump("f")); got != want2 {
		t.Fatalf("live set:\n%s\nwant\n%s", got, want2)
	}
	sh(t, mnt, rm("f", "user.a"))

	if got := sh(t, filepath.Join(mnt, ".asof", t1.String()), dump("f")); got != want1 {
		t.Errorf(".asof/t1:\n%s\nwant\n%s", got, want1)
	}
	if got := sh(t, filepath.Join(mnt, ".asof", t2.String()), dump("f")); got != want2 {
		t.Errorf(".asof/t2:\n%s\nwant\n%s", got, want2)
	}
	if got := sh(t, mnt, dump("f")); got != "# file: f\nuser.b=\"bee\"\n\n" {
		t.Errorf("live set after removing user.a:\n%s", got)
	}
	// The past is read-only.
	if out, err := shErr(filepath.Join(mnt, ".asof", t2.String()), set("f", "user.c", "see")); err == nil {
		t.Errorf("setxattr under .asof succeeded: %s", out)
	}
	// The file's data and the attributes of other files are untouched.
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "data\nmore\n" {
		t.Errorf("content %q %v", b, err)
	}
}
