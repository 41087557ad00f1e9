package search

import (
	"bytes"
	"compress/zlib"
	"testing"
)

func TestIsGitLooseObject(t *testing.T) {
	for p, want := range map[string]bool{
		"src/.git/objects/ab/cdef0123456789abcdef0123456789abcdef01":                           true,
		"objects/ab/cdef0123456789abcdef0123456789abcdef01":                                    true,
		"r.git/objects/00/" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd": true,
		".git/objects/ab/tmp_obj_Xy12Ab":                                                       true,
		".git/objects/ab/cdef0123456789abcdef0123456789abcdef0":                                false, // 37 digits
		".git/objects/ab/CDEF0123456789ABCDEF0123456789ABCDEF01":                               false,
		".git/objects/pack/pack-0123456789abcdef0123456789abcdef01234567.pack":                 false,
		".git/objects/info/packs":                                                              false,
		".git/stuff/ab/cdef0123456789abcdef0123456789abcdef01":                                 false,
		"ab/cdef0123456789abcdef0123456789abcdef01":                                            false,
		"cdef0123456789abcdef0123456789abcdef01":                                               false,
	} {
		if got := isGitLooseObject(p); got != want {
			t.Errorf("isGitLooseObject(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestGitObjectsUnindexedButFound: git loose objects are zlib streams
// whose postings cost the index worker milliseconds each for nothing a
// query shares; they are left unindexed (by a catch-up, as in a mount,
// and by a rebuild), and grep still finds a needle in their bytes.
func TestGitObjectsUnindexedButFound(t *testing.T) {
	st, data := openStore(t)
	var z bytes.Buffer
	w, err := zlib.NewWriterLevel(&z, zlib.NoCompression) // the needle stays in the bytes
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("blob 17\x00a needle inside\n"))
	w.Close()
	const obj = "src/.git/objects/ab/cdef0123456789abcdef0123456789abcdef01"
	sid := loadSession(t, st, map[string][]byte{"src/a.txt": []byte("a needle\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, sid, obj, z.Bytes())
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		ids, err := ix.be.ids(sid, idQuery{Field: "unindexed", Term: "y"})
		if err != nil || len(ids) != 1 || ids[0] != obj {
			t.Fatalf("%s: unindexed documents %v (%v), want [%s]", when, ids, err, obj)
		}
		out, code, _ := padGrep(t, ix, sid, []string{"-rc", "needle"})
		if want := obj + ":1\nsrc/a.txt:1\n"; code != 0 || out != want {
			t.Errorf("%s: grep -rc needle: %q exit %d, want %q", when, out, code, want)
		}
	}
	check("after a catch-up")
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	check("after a rebuild")
}
