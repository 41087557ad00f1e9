package mvcc

import (
	"bytes"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

func TestVersionKeysSortNewestFirst(t *testing.T) {
	sid := testID()
	chain := dentryChain(sid, 7, "main.go")
	k1 := append(append([]byte(nil), chain...), inv(100)...)
	k2 := append(append([]byte(nil), chain...), inv(200)...)
	if bytes.Compare(k2, k1) >= 0 {
		t.Fatal("newer version must sort before older")
	}
	if hlcFromInv(k1) != 100 || hlcFromInv(k2) != 200 {
		t.Fatal("HLC does not round-trip through the key")
	}
	// Seeking from ^T lands on the newest version <= T.
	seek := append(append([]byte(nil), chain...), inv(150)...)
	if !(bytes.Compare(k2, seek) < 0 && bytes.Compare(seek, k1) <= 0) {
		t.Fatal("seek key for 150 must fall between the versions at 200 and 100")
	}
}

func TestEntryChainsNeverInterleave(t *testing.T) {
	sid := testID()
	a := append(dentryChain(sid, 1, "a"), inv(1)...)
	aOld := append(dentryChain(sid, 1, "a"), inv(0)...)
	ab := append(dentryChain(sid, 1, "ab"), inv(Latest)...)
	a1 := append(dentryChain(sid, 1, "a\x01"), inv(Latest)...)
	if !(bytes.Compare(a, aOld) < 0 && bytes.Compare(aOld, a1) < 0 && bytes.Compare(a1, ab) < 0) {
		t.Fatal("every version of \"a\" must sort before the chains of \"a\\x01\" and \"ab\"")
	}
	// The whole chain of "a" lies under its prefix and before its end.
	end := kv.PrefixEnd(dentryChain(sid, 1, "a"))
	if bytes.Compare(aOld, end) >= 0 || bytes.Compare(a1, end) < 0 {
		t.Fatal("PrefixEnd of a chain must bound exactly that chain")
	}
	// Directories and sessions are separate ranges.
	other := append(dentryChain(sid, 2, ""), 0)
	if bytes.HasPrefix(other, dirPrefix(sid, 1)) {
		t.Fatal("directory prefixes overlap")
	}
}

func TestIntegersAreBigEndian(t *testing.T) {
	sid := testID()
	if bytes.Compare(eventKey(sid, 255), eventKey(sid, 256)) >= 0 {
		t.Fatal("event keys must sort by sequence number")
	}
	if bytes.Compare(inodeChain(sid, 255), inodeChain(sid, 256)) >= 0 {
		t.Fatal("inode keys must sort by inode number")
	}
}

func TestRecordChecksumDetectsCorruption(t *testing.T) {
	k := []byte("I-test")
	v, err := encode(&Inode{Ino: 9, Mode: sIFREG | 0o644, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var n Inode
	if err := decode(k, v, &n); err != nil || n.Ino != 9 || n.Name != "x" {
		t.Fatalf("round trip: %+v %v", n, err)
	}
	v[len(v)-1] ^= 0x40
	if err := decode(k, v, &n); err == nil || !bytes.Contains([]byte(err.Error()), k) {
		t.Fatalf("corrupt record: err = %v; want ErrCorrupt naming the key", err)
	}
}

func testID() SessionID {
	id, err := NewSessionID()
	if err != nil {
		panic(err) // test helper: crypto/rand failed
	}
	return id
}

// TestVersionKeysOneAllocation: the write paths' one-allocation version
// keys are the chains' keys plus inv(h), and appending to the chain they
// return does not change the version key.
func TestVersionKeysOneAllocation(t *testing.T) {
	sid := SessionID{7, 0xff}
	h := HLC(0x0102030405060708)
	for _, c := range []struct {
		what     string
		chain, k []byte
		want     []byte
	}{
		{"dentry", nil, nil, dentryChain(sid, 9, "a\x00b")},
		{"inode", nil, nil, inodeChain(sid, 42)},
	} {
		if c.what == "dentry" {
			c.chain, c.k = dentryVersion(sid, 9, "a\x00b", h)
		} else {
			c.chain, c.k = inodeVersion(sid, 42, h)
		}
		if !bytes.Equal(c.chain, c.want) {
			t.Errorf("%s: chain %x, want %x", c.what, c.chain, c.want)
		}
		want := append(append([]byte(nil), c.want...), inv(h)...)
		if !bytes.Equal(c.k, want) {
			t.Errorf("%s: version key %x, want %x", c.what, c.k, want)
		}
		_ = append(c.chain, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee)
		if !bytes.Equal(c.k, want) {
			t.Errorf("%s: appending to the chain changed the version key to %x", c.what, c.k)
		}
	}
}
