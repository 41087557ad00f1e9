package mvcc

import "testing"

// fsck knows the xattr chains (X keys): it used to report every one as an
// unknown key prefix, and --repair would have quarantined them all.
func TestFsckAcceptsXattrChains(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("x")
	f := e.write(sid, "f", []byte("x"))
	if err := e.st.SetXattr(sid, f.Ino, "user.a", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetXattr(sid, f.Ino, "user.a", nil, 0); err != nil {
		t.Fatal(err)
	}
	r, err := e.st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		t.Errorf("fsck of a sound store with xattrs: %+v", p)
	}
}
