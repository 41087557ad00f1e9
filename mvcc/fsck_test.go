package mvcc

import (
	"errors"
	"github.com/padfs/padfs/mvcc/kv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// TestRolledBackMetaPage: a damaged newest bbolt meta page makes bbolt
// fall back to the older one, silently losing the last fold. The fold
// record in wal/STATE catches it; fsck's RepairDir accepts it explicitly.
func TestRolledBackMetaPage(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("rb")
	for i := 0; i < 3; i++ {
		e.write(sid, "f"+string(rune('a'+i)), []byte(strings.Repeat("x", 100*(i+1))))
		if err := e.st.kv.(interface{ Flush() error }).Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(e.dir, StoreFile)
	fi, err := bolt.CheckFile(db)
	if err != nil {
		t.Fatal(err)
	}
	cur := fi.Metas[fi.Current]
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the current meta page's checksum.
	b[int(cur.PageSize)*cur.Page+16+56] ^= 0xff
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenDir(e.dir)
	if !errors.Is(err, wal.ErrRolledBack) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenDir after a damaged newest meta page: %v; want store rolled back", err)
	}
	msg := err.Error()
	older := fi.Metas[1-fi.Current].TxID
	for _, want := range []string{"store rolled back", wal.StatePath(filepath.Join(e.dir, WALDir)),
		"txid " + itoa(cur.TxID), "txid " + itoa(older), "fsck --repair"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	t.Log(msg)
	probs, err := RepairDir(e.dir)
	if err != nil || len(probs) != 1 || probs[0].Kind != ProblemStore || probs[0].Repaired == "" {
		t.Fatalf("RepairDir: %+v, %v", probs, err)
	}
	st, err := OpenDir(e.dir)
	if err != nil {
		t.Fatalf("open after accepting the rollback: %v", err)
	}
	st.Close()

	// A store file deleted under the log is refused too, not recreated empty.
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(e.dir); !errors.Is(err, wal.ErrRolledBack) || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("OpenDir on an empty padfs.db: %v", err)
	}
}

func itoa(v uint64) string { return uitoa(v) }

func uitoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

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
