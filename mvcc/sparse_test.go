package mvcc

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// Extent.Len was a uint32: widening it must not change how records encode
// or decode (CBOR integers take their shortest form whatever the Go type).
func TestExtentLenEncodingUnchanged(t *testing.T) {
	type oldExtent struct {
		Chunk []byte `cbor:"1,keyasint,omitempty"`
		Len   uint32 `cbor:"2,keyasint"`
	}
	h := bytes.Repeat([]byte{7}, 32)
	for _, l := range []uint32{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1} {
		for _, c := range [][]byte{nil, h} {
			old, err := encode(oldExtent{c, l})
			if err != nil {
				t.Fatal(err)
			}
			cur, err := encode(Extent{c, uint64(l)})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(old, cur) {
				t.Errorf("Len %d: encoding changed: %x, was %x", l, cur, old)
			}
			var e Extent
			if err := decode([]byte("k"), old, &e); err != nil || e.Len != uint64(l) || !bytes.Equal(e.Chunk, c) {
				t.Errorf("Len %d: old record decodes as %+v, %v", l, e, err)
			}
		}
	}
	// A hole longer than 4 GiB round-trips.
	b, err := encode(Extent{Len: 999999999999999})
	if err != nil {
		t.Fatal(err)
	}
	var e Extent
	if err := decode([]byte("k"), b, &e); err != nil || e.Len != 999999999999999 {
		t.Errorf("long hole decodes as %+v, %v", e, err)
	}
}

// PutSparse stores only the data ranges: a petabyte of holes around a few
// bytes costs a few extents, reads back, and has no whole-file hash.
func TestPutSparse(t *testing.T) {
	s, _, _ := openTest(t)
	const size = 999999999999999
	data := bytes.Repeat([]byte("padfs"), 1000) // 5000 bytes at 1 TiB
	r := bytes.NewReader(append(make([]byte, 0), data...))
	sp := Sparse{R: offsetReader{r, 1 << 40}, Size: size, Data: []Range{{1 << 40, int64(len(data))}}}
	c, err := s.PutSparse(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != size || len(c.Extents) > 4 || c.Hash != nil {
		t.Fatalf("size %d, %d extents, hash %x", c.Size, len(c.Extents), c.Hash)
	}
	n := &Inode{Mode: sIFREG | 0o644}
	c.Apply(n)
	got := make([]byte, len(data)+2)
	if _, err := s.ReadAt(n, got, 1<<40-1); err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte{0}, data...), 0); !bytes.Equal(got, want) {
		t.Errorf("read back %q", got[:20])
	}
	if rs := n.DataRanges(size); len(rs) != 1 || rs[0].Off != 1<<40 || rs[0].Len < int64(len(data)) {
		t.Errorf("data ranges %v", rs)
	}
	// A small sparse file is inline, its holes zeros, its hash that of
	// its bytes.
	c, err = s.PutSparse(context.Background(), Sparse{R: bytes.NewReader([]byte("ab")), Size: 100, Data: []Range{{0, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]byte("ab"), make([]byte, 98)...); !bytes.Equal(c.Inline, want) || c.Hash == nil {
		t.Errorf("inline %q, hash %x", c.Inline, c.Hash)
	}
	if _, err := s.PutSparse(context.Background(), Sparse{Size: MaxFileSize + 1}); err == nil {
		t.Error("a size beyond MaxFileSize was accepted")
	}
}

// offsetReader reads r as if it started at off.
type offsetReader struct {
	r   *bytes.Reader
	off int64
}

func (o offsetReader) ReadAt(p []byte, off int64) (int, error) { return o.r.ReadAt(p, off-o.off) }

// A truncate through the store keeps the data and adds a hole; shrinking
// it back cuts the hole.
func TestSetAttrTruncateSparse(t *testing.T) {
	st, sid, root := openTest(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	n := writeFile(t, st, sid, root, "f", data)
	size := uint64(999999999999999)
	n, err := st.SetAttr(sid, n.Ino, SetAttr{Size: &size})
	if err != nil {
		t.Fatal(err)
	}
	if n.Size != size || n.Blocks() > 2*uint64(len(data))/512 || len(n.Extents) > 8 {
		t.Fatalf("size %d, %d blocks, %d extents", n.Size, n.Blocks(), len(n.Extents))
	}
	got := make([]byte, len(data)+10)
	if _, err := st.ReadAt(n, got, 0); err != nil || !bytes.Equal(got, append(append([]byte{}, data...), make([]byte, 10)...)) {
		t.Errorf("read %q, %v", got[len(data)-5:], err)
	}
	size = 5000
	if n, err = st.SetAttr(sid, n.Ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	all, err := st.ReadAll(n)
	if err != nil || !bytes.Equal(all, data[:5000]) {
		t.Errorf("after shrinking: %d bytes, %v", len(all), err)
	}
	size = MaxFileSize + 1
	if _, err := st.SetAttr(sid, n.Ino, SetAttr{Size: &size}); !errors.Is(err, ErrTooBig) {
		t.Errorf("truncate beyond MaxFileSize: %v, want ErrTooBig", err)
	}
}

// Without a whole-file hash, diff compares extents: two sparse
// petabytes that differ in one byte differ.
func TestSameContentSparse(t *testing.T) {
	s, _, _ := openTest(t)
	put := func(b string) *Inode {
		t.Helper()
		c, err := s.PutSparse(context.Background(), Sparse{R: offsetReader{bytes.NewReader([]byte(b)), 1 << 40}, Size: 1 << 50, Data: []Range{{1 << 40, int64(len(b))}}})
		if err != nil {
			t.Fatal(err)
		}
		n := &Inode{Mode: sIFREG | 0o644}
		c.Apply(n)
		return n
	}
	a, a2, b := put("same"), put("same"), put("diff")
	if a.ContentHash != nil || !sameContent(a, a2) {
		t.Error("equal sparse files differ")
	}
	if sameContent(a, b) {
		t.Error("sparse files with different data compare equal")
	}
}
