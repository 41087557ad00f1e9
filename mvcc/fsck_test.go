package mvcc

import (
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// TestFsckFindsAndRepairsDamage damages a real store in several ways and
// checks that Fsck reports each by kind and key, and that Repair leaves a
// store that checks clean.
func TestFsckFindsAndRepairsDamage(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("fsck")
	big := e.write(sid, "big.bin", bigText(1, 300<<10, "m"))
	e.write(sid, "small.txt", []byte("hello"))
	if r, err := e.st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fresh store: %+v %v", r, err)
	}
	var h0, h1 Hash
	copy(h0[:], big.Extents[0].Chunk)
	copy(h1[:], big.Extents[1].Chunk)
	h, err := e.st.Header(sid)
	if err != nil {
		t.Fatal(err)
	}
	now := e.now()
	err = e.st.kv.Update(func(tx kv.Txn) error {
		v, _ := tx.Get(chunkKey(h0))
		v = append([]byte(nil), v...)
		v[10] ^= 1 // flipped chunk byte
		if err := tx.Put(chunkKey(h0), v); err != nil {
			return err
		}
		if err := tx.Delete(chunkKey(h1)); err != nil { // missing chunk
			return err
		}
		if err := tx.Delete(chunkRefKey(h1, sid)); err != nil {
			return err
		}
		// dangling dentry
		d, _ := encode(&Dentry{Ino: 999999, Type: sIFREG})
		if err := tx.Put(append(dentryChain(sid, h.Root, "ghost"), inv(now)...), d); err != nil {
			return err
		}
		// counter mismatch
		c, _ := encode(&counters{NextSeq: 1})
		if err := tx.Put(countersKey(sid), c); err != nil {
			return err
		}
		// flipped record byte
		ev, _ := tx.Get(eventKey(sid, 1))
		ev = append([]byte(nil), ev...)
		ev[len(ev)-1] ^= 1
		return tx.Put(eventKey(sid, 1), ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range r.Problems {
		kinds[p.Kind]++
		t.Log(p)
	}
	for _, k := range []string{ProblemChunk, ProblemManifest, ProblemDentry, ProblemCounter, ProblemRecord, ProblemEvents} {
		if kinds[k] == 0 {
			t.Errorf("no %s problem reported", k)
		}
	}
	r, err = e.st.Fsck(FsckOptions{Repair: true, QuarantineDir: filepath.Join(e.dir, QuarantineDir)})
	if err != nil || r.Quarantine == "" {
		t.Fatalf("repair: %v (quarantine %q)", err, r.Quarantine)
	}
	r, err = e.st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		// What is lost stays reported: the missing chunks and the log gap.
		if p.Kind != ProblemManifest && p.Kind != ProblemEvents {
			t.Errorf("after repair: %s", p)
		}
	}
}
