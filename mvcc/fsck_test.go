package mvcc

import (
	"fmt"
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

// TestFsckRejectsMalformedKeys: a record of every kind under a malformed
// key (or with a value that does not fit its key) is reported with what
// is wrong and quarantined by Repair; a missing chunk reference is added
// back and one to a chunk that is not stored is deleted. The store then
// checks clean.
func TestFsckRejectsMalformedKeys(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("fsck")
	big := e.write(sid, "big.bin", bigText(1, 300<<10, "m"))
	var used, absent Hash
	copy(used[:], big.Extents[0].Chunk)
	absent[0] = 0xab
	gone, other := Hash{0xcd}, testID()
	junk := []byte{1, 2, 3}
	want := map[string]string{ // key -> detail
		fmt.Sprintf("%q", metaKey("fscktest")):            "value is 7 bytes, want 8",
		fmt.Sprintf("%q", key(pChunkRef, junk)):           "malformed chunk reference key",
		fmt.Sprintf("%q", key(pChunk, junk)):              "malformed chunk key",
		fmt.Sprintf("%q", chunkKey(absent)):               "SHA-256 of the bytes does not match the key",
		fmt.Sprintf("%q", key(pHeader, junk)):             "key too short",
		fmt.Sprintf("%q", key(pDentry, sid[:], junk)):     "malformed directory entry key",
		fmt.Sprintf("%q", key(pInode, sid[:], junk)):      "malformed inode key",
		fmt.Sprintf("%q", key(pLive, sid[:], junk)):       "malformed live-entry key",
		fmt.Sprintf("%q", key(pPrune, sid[:], junk)):      "malformed key",
		fmt.Sprintf("%q", key(pSuperseded, sid[:], junk)): "malformed key",
		fmt.Sprintf("%q", key(pJob, sid[:], junk)):        "malformed job key",
		fmt.Sprintf("%q", key('~', junk)):                 "unknown key prefix '~'",
		fmt.Sprintf("%q", chunkRefKey(used, sid)):         "missing reference from the session to a chunk it uses",
		fmt.Sprintf("%q", chunkRefKey(gone, other)):       "reference to a chunk that is not stored",
	}
	err := e.st.kv.Update(func(tx kv.Txn) error {
		for _, k := range [][]byte{key(pChunkRef, junk), key(pChunk, junk), key(pHeader, junk),
			key(pDentry, sid[:], junk), key(pInode, sid[:], junk), key(pLive, sid[:], junk),
			key(pPrune, sid[:], junk), key(pSuperseded, sid[:], junk), key(pJob, sid[:], junk), key('~', junk)} {
			if err := tx.Put(k, frame(junk)); err != nil {
				return err
			}
		}
		if err := tx.Put(metaKey("fscktest"), make([]byte, 7)); err != nil {
			return err
		}
		// A chunk with an intact frame under another chunk's hash.
		if err := tx.Put(chunkKey(absent), frame([]byte("not these bytes"))); err != nil {
			return err
		}
		if err := tx.Delete(chunkRefKey(used, sid)); err != nil {
			return err
		}
		return tx.Put(chunkRefKey(gone, other), []byte{})
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range r.Problems {
		got[p.Key] = p.Detail
	}
	for k, d := range want {
		if got[k] != d {
			t.Errorf("key %s: reported %q, want %q", k, got[k], d)
		}
	}
	r, err = e.st.Fsck(FsckOptions{Repair: true, QuarantineDir: filepath.Join(e.dir, QuarantineDir)})
	if err != nil || r.Quarantine == "" {
		t.Fatalf("repair: %v (quarantine %q)", err, r.Quarantine)
	}
	repaired := map[string]string{}
	for _, p := range r.Problems {
		repaired[p.Key] = p.Repaired
	}
	if k := fmt.Sprintf("%q", chunkRefKey(used, sid)); repaired[k] != "reference added" {
		t.Errorf("missing reference: repaired %q, want reference added", repaired[k])
	}
	if k := fmt.Sprintf("%q", chunkRefKey(gone, other)); repaired[k] != "reference deleted" {
		t.Errorf("dangling reference: repaired %q, want reference deleted", repaired[k])
	}
	if r, err := e.st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Errorf("after repair: %+v %v", r.Problems, err)
	}
}
