package mvcc

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
)

// Tests of issue 10 (bounded history): Prune keeps the state as of T, the
// kept checkpoints and everything after T exactly, and frees the rest.

// treeDump is a whole tree as of a point: path -> type, content, xattrs.
func treeDump(t *testing.T, st *Store, sid SessionID, at HLC) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(func(tx *ReadTx) error {
		return tx.WalkTree(sid, at, func(e TreeEntry) error {
			n := e.Node
			var b strings.Builder
			fmt.Fprintf(&b, "mode %o nlink %d size %d", n.Mode, n.Nlink, n.Size)
			if n.IsRegular() {
				c, err := tx.Content(n)
				if err != nil {
					return fmt.Errorf("%s: %w", e.Path, err)
				}
				fmt.Fprintf(&b, " sha %x", sha256.Sum256(c))
			}
			if n.IsSymlink() {
				fmt.Fprintf(&b, " -> %s", n.Target)
			}
			xs, err := tx.xattrsOf(sid, n, at)
			if err != nil {
				return err
			}
			for _, k := range sortedNames(xs) {
				fmt.Fprintf(&b, " %s=%q", k, xs[k])
			}
			out[e.Path] = b.String()
			return nil
		})
	})
	if err != nil {
		t.Fatalf("walk as of %s: %v", at, err)
	}
	return out
}

// pruneScenario builds a history around T: overwritten inline and chunked
// files, a file removed, a rename, xattrs set, changed and removed, a
// checkpoint before T, a fork sharing chunks, and commits after T.
type pruneScenario struct {
	e                 *lcEnv
	sid, child        SessionID
	cp, before, t, t2 HLC
	onlyOld           Hash // a chunk only versions before T name
	sharedWithKept    Hash // a chunk a pruned version and a kept one name
	forkChunk         Hash // a chunk of a pruned version the fork still uses
	points            []HLC
	dumps             []map[string]string
	childDump         map[string]string
	eventsBefore      int
}

func firstChunk(t *testing.T, n *Inode) Hash {
	t.Helper()
	hs := chunkSet(n)
	if len(hs) == 0 {
		t.Fatalf("inode %d has no chunks", n.Ino)
	}
	return hs[0]
}

func buildPruneScenario(t *testing.T, e *lcEnv) *pruneScenario {
	p := &pruneScenario{e: e}
	p.sid = e.session("pruned")
	sid := p.sid
	for i := 0; i < 5; i++ {
		e.write(sid, "notes.txt", []byte(fmt.Sprintf("notes v%d MARKER-old-%d\n", i, i)))
	}
	old := e.write(sid, "big.bin", bigText(1, 200<<10, "MARKER-chunk-old", 1000))
	p.onlyOld = firstChunk(t, old)
	e.write(sid, "big.bin", bigText(11, 200<<10, "", 0)) // the version cp reads
	// A second file whose first chunk equals a pruned version's: the
	// chunk stays for it.
	keep := bigText(2, 200<<10, "", 0)
	e.write(sid, "keep.bin", append([]byte(nil), keep...))
	kv1 := e.write(sid, "keep2.bin", append([]byte(nil), keep...))
	p.sharedWithKept = firstChunk(t, kv1)
	e.write(sid, "keep2.bin", bigText(3, 100<<10, "", 0))
	forked := e.write(sid, "forked.bin", bigText(4, 150<<10, "", 0))
	p.forkChunk = firstChunk(t, forked)
	e.write(sid, "dir/gone.txt", []byte("removed before T\n"))
	e.write(sid, "dir/moved.txt", []byte("renamed before T\n"))
	f, err := e.st.Walk(sid, "notes.txt", Latest)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"red", "green", "blue"} {
		if err := e.st.SetXattr(sid, f.Ino, "user.color", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		if err := e.st.SetXattr(sid, f.Ino, fmt.Sprintf("user.tmp%d", i), []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.SetXattr(sid, f.Ino, "user.tmp0", nil, 0); err != nil {
		t.Fatal(err)
	}
	var errc error
	if p.cp, errc = e.st.CreateCheckpoint(sid, "cp"); errc != nil {
		t.Fatal(errc)
	}
	ch, err := e.st.Fork(t.Context(), sid, Latest, ForkOptions{Name: "child"})
	if err != nil {
		t.Fatal(err)
	}
	p.child = ch.ID
	e.write(sid, "forked.bin", bigText(5, 150<<10, "", 0))
	for i := 5; i < 8; i++ {
		e.write(sid, "notes.txt", []byte(fmt.Sprintf("notes v%d MARKER-old-%d\n", i, i)))
	}
	p.before = e.now() // not a checkpoint: reads the state as of T after the prune
	e.write(sid, "big.bin", bigText(6, 200<<10, "", 0))
	dir, _ := e.parent(sid, "dir/x")
	if err := e.st.Remove(sid, dir, "gone.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Rename(sid, dir, "moved.txt", dir, "moved2.txt", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetXattr(sid, f.Ino, "user.tmp1", nil, 0); err != nil {
		t.Fatal(err)
	}
	e.write(sid, "notes.txt", []byte("notes at T\n"))
	p.t = e.now()
	e.write(sid, "notes.txt", []byte("notes after T\n"))
	if err := e.st.SetXattr(sid, f.Ino, "user.color", []byte("after"), 0); err != nil {
		t.Fatal(err)
	}
	e.write(sid, "later.txt", []byte("after T\n"))
	p.t2 = e.now()
	e.write(sid, "notes.txt", []byte("notes latest\n"))
	p.points = []HLC{p.cp, p.t, p.t2, Latest}
	for _, at := range p.points {
		p.dumps = append(p.dumps, treeDump(t, e.st, sid, at))
	}
	p.childDump = treeDump(t, e.st, p.child, Latest)
	n := 0
	for _, ev := range e.events(sid, LogFilter{}) {
		if ev.HLC <= p.t {
			n++
		}
	}
	p.eventsBefore = n
	return p
}

func hasKey(t *testing.T, st *Store, k []byte) bool {
	t.Helper()
	var v []byte
	if err := st.View(func(tx *ReadTx) error {
		var err error
		v, err = tx.r.Get(k)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v != nil
}

// versionsBefore counts the D, I and X versions of sid stamped before at.
func versionsBefore(t *testing.T, st *Store, sid SessionID, at HLC) int {
	t.Helper()
	n := 0
	for _, pre := range []byte{pDentry, pInode, pXattr} {
		if err := st.View(func(tx *ReadTx) error {
			return scanKeys(tx.r, key(pre, sid[:]), func(k, _ []byte) error {
				if hlcFromInv(k) < at {
					n++
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// check verifies the store after a prune of p.sid before p.t.
func (p *pruneScenario) check(t *testing.T) {
	t.Helper()
	st := p.e.st
	for i, at := range p.points {
		if got := treeDump(t, st, p.sid, at); !reflect.DeepEqual(got, p.dumps[i]) {
			t.Errorf("tree as of %s changed by the prune:\n got %v\nwant %v", at, got, p.dumps[i])
		}
	}
	// A point before T that is no checkpoint reads the state as of T.
	if got := treeDump(t, st, p.sid, p.before); !reflect.DeepEqual(got, p.dumps[1]) {
		t.Errorf("tree as of %s (pruned) is not the state as of T:\n got %v\nwant %v", p.before, got, p.dumps[1])
	}
	if got := treeDump(t, st, p.child, Latest); !reflect.DeepEqual(got, p.childDump) {
		t.Errorf("fork changed by the parent's prune:\n got %v\nwant %v", got, p.childDump)
	}
	if hasKey(t, st, chunkKey(p.onlyOld)) || hasKey(t, st, chunkRefKey(p.onlyOld, p.sid)) {
		t.Errorf("chunk only pruned versions named is still stored (or referenced)")
	}
	if !hasKey(t, st, chunkKey(p.sharedWithKept)) || !hasKey(t, st, chunkRefKey(p.sharedWithKept, p.sid)) {
		t.Errorf("chunk a kept version names was deleted")
	}
	if !hasKey(t, st, chunkKey(p.forkChunk)) || !hasKey(t, st, chunkRefKey(p.forkChunk, p.child)) {
		t.Errorf("chunk of the fork: want stored, referenced by the fork")
	}
	// Versions stamped before the checkpoint: only those read at cp (an
	// entry and an inode version per name, the root's inode, 3 xattrs).
	if n, want := versionsBefore(t, st, p.sid, p.cp+1), len(p.dumps[0])*2+1+3; n > want {
		t.Errorf("%d versions before the checkpoint remain, want at most %d", n, want)
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil {
		t.Fatal(err)
	} else {
		for _, pr := range r.Problems {
			t.Errorf("fsck after the prune: %+v", pr)
		}
	}
	// The log and the checkpoint stay.
	if n := len(p.e.events(p.sid, LogFilter{})); n < p.eventsBefore {
		t.Errorf("log lost events: %d", n)
	}
	if at, ok, err := checkpointOf(st, p.sid, "cp"); err != nil || !ok || at != p.cp {
		t.Errorf("checkpoint: %v %v %v", at, ok, err)
	}
	// No S record up to T is left but those holding kept versions.
	var recs int
	st.View(func(tx *ReadTx) error {
		return tx.r.Scan(key(pSuperseded, p.sid[:]), supersededKey(p.sid, p.t+1), func(k, v []byte) (bool, error) {
			recs++
			return true, nil
		})
	})
	if recs > 20 {
		t.Errorf("%d S records up to T remain", recs)
	}

	st.View(func(tx *ReadTx) error {
		// Every counted reference equals the number of versions naming it.
		want := map[Hash]uint64{}
		scanKeys(tx.r, key(pInode, p.sid[:]), func(k, v []byte) error {
			var n Inode
			decode(k, v, &n)
			for _, h := range chunkSet(&n) {
				want[h]++
			}
			return nil
		})
		for h, c := range want {
			v, _ := tx.r.Get(chunkRefKey(h, p.sid))
			if got, counted, _ := refCount(nil, v); !counted || got != c {
				t.Errorf("reference to %x: %d (counted %v), want %d", h[:4], got, counted, c)

			}
		}
		return nil
	})
}

func checkpointOf(st *Store, sid SessionID, name string) (HLC, bool, error) {
	var at HLC
	var ok bool
	err := st.View(func(tx *ReadTx) error {
		var err error
		at, ok, err = tx.Checkpoint(sid, name)
		return err
	})
	return at, ok, err
}

func TestPruneKeepsStateAsOfT(t *testing.T) {
	e := lcOpen(t)
	p := buildPruneScenario(t, e)
	before := storedBytes(t, e.st)
	dry, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if storedBytes(t, e.st) != before {
		t.Fatal("dry run changed the store")
	}
	if f, _, _ := e.st.PrunedTo(p.sid); f != 0 {
		t.Fatalf("dry run set the floor to %s", f)
	}
	r, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dry %+v\nreal %+v", dry, r)
	if r.Versions == 0 || r.Chunks == 0 || r.Bytes == 0 || r.Scanned != 0 || r.Records == 0 || r.Recounted {
		t.Fatalf("receipt %+v", r)
	}
	if dry.Versions != r.Versions || dry.Chunks != r.Chunks || dry.Bytes != r.Bytes {
		t.Fatalf("dry run said %+v, the prune did %+v", dry, r)
	}
	if r.Records > p.eventsBefore {
		t.Fatalf("read %d records for %d commits up to T", r.Records, p.eventsBefore)
	}
	p.check(t)
	if storedBytes(t, e.st) >= before {
		t.Fatal("the store did not shrink")
	}
	// A second prune to the same T frees nothing more.
	r2, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t})
	if err != nil || r2.Versions != 0 || r2.Chunks != 0 {
		t.Fatalf("second prune: %+v %v", r2, err)
	}
	// Checkpoint states dropped: cp then reads the state as of T.
	if _, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t, DropCheckpoints: true}); err != nil {
		t.Fatal(err)
	}
	if got := treeDump(t, e.st, p.sid, p.cp); !reflect.DeepEqual(got, p.dumps[1]) {
		t.Fatalf("checkpoint after dropping its state: %v, want the state as of T %v", got, p.dumps[1])
	}
	for i, at := range p.points[1:] {
		if got := treeDump(t, e.st, p.sid, at); !reflect.DeepEqual(got, p.dumps[i+1]) {
			t.Fatalf("tree as of %s changed", at)
		}
	}
	if n := versionsBefore(t, e.st, p.sid, p.cp+1); n > len(p.dumps[1])*2+1+3 {
		t.Fatalf("%d versions from before the checkpoint remain after dropping it", n)
	}
	// The name removed before T is gone from the keyspace, its tombstone
	// too now that the checkpoint that read it is dropped: listing the
	// directory no longer visits it.
	dir, err := e.st.Walk(p.sid, "dir", Latest)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	e.st.View(func(tx *ReadTx) error {
		return scanKeys(tx.r, dentryChain(p.sid, dir.Ino, "gone.txt"), func(_, _ []byte) error { n++; return nil })
	})
	if n != 0 {
		t.Errorf("%d versions of the name removed before T remain", n)
	}
	// The fork's chunk, which only the checkpoint's state of the parent
	// still named, is now the fork's alone.
	if !hasKey(t, e.st, chunkKey(p.forkChunk)) || hasKey(t, e.st, chunkRefKey(p.forkChunk, p.sid)) {
		t.Fatal("fork chunk: want stored, no longer referenced by the parent")
	}
	// The store reopens with the floor (it is on disk, not only cached).
	st := e.reopen()
	if got := treeDump(t, st, p.sid, p.before); !reflect.DeepEqual(got, p.dumps[1]) {
		t.Fatalf("after reopening, a pruned point reads %v", got)
	}
}

// Stores written before S records and counted references: the prune falls
// back to a scan of the chains and counts the references once.
func TestPruneWithoutRecordsScansChains(t *testing.T) {
	e := lcOpen(t)
	p := buildPruneScenario(t, e)
	// Make it look as an older padfs wrote it: no S or P keys, references
	// not counted.
	err := e.st.kv.Update(func(tx kv.Txn) error {
		for _, pre := range [][]byte{{pSuperseded}, {pPrune}} {
			if err := scanKeys(tx, pre, func(k, _ []byte) error { return tx.Delete(k) }); err != nil {
				return err
			}
		}
		return scanKeys(tx, []byte{pChunkRef}, func(k, _ []byte) error { return tx.Put(k, []byte{}) })
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	before := storedBytes(t, e.st)
	dry, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if storedBytes(t, e.st) != before {
		t.Fatal("dry run changed the store")
	}
	r, err := e.st.Prune(p.sid, PruneOptions{Before: p.t, UnlinkedBefore: p.t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dry %+v\nreal %+v", dry, r)
	if r.Scanned == 0 || r.Versions == 0 || r.Chunks == 0 || !r.Recounted {
		t.Fatalf("receipt %+v", r)
	}
	if dry.Versions != r.Versions || dry.Chunks != r.Chunks || dry.Bytes != r.Bytes {
		t.Fatalf("dry run said %+v, the prune did %+v", dry, r)
	}
	p.check(t)
	// The child was not recounted by its parent's prune; its references
	// are still uncounted and still protect its chunks.
	// A later commit and prune use records: no second scan.
	e.write(p.sid, "notes.txt", []byte("one more\n"))
	e.write(p.sid, "notes.txt", []byte("and more\n"))
	t3 := e.now()
	e.write(p.sid, "notes.txt", []byte("last\n"))
	r, err = e.st.Prune(p.sid, PruneOptions{Before: t3, UnlinkedBefore: t3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Versions == 0 {
		t.Fatalf("second prune freed nothing: %+v", r)
	}
	if got := e.mustRead(p.sid, "notes.txt", t3); got != "and more\n" {
		t.Fatalf("notes.txt as of T3: %q", got)
	}
}

// Pruning part of the history reads the records of that part only.
func TestPruneCostFollowsWhatIsFreed(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("cost")
	for i := 0; i < 200; i++ {
		e.write(sid, fmt.Sprintf("f%03d", i%50), []byte(fmt.Sprintf("v%d\n", i)))
	}
	t1 := e.now()
	for i := 0; i < 2000; i++ {
		e.write(sid, fmt.Sprintf("f%03d", i%50), []byte(fmt.Sprintf("w%d\n", i)))
	}
	r, err := e.st.Prune(sid, PruneOptions{Before: t1, UnlinkedBefore: t1})
	if err != nil {
		t.Fatal(err)
	}
	commits := 0
	for _, ev := range e.events(sid, LogFilter{}) {
		if ev.HLC <= t1 {
			commits++
		}
	}
	if r.Records == 0 || r.Records > commits || r.Scanned != 0 {
		t.Fatalf("prune of the first %d commits read %d records and scanned %d keys", commits, r.Records, r.Scanned)
	}
	for i := 0; i < 50; i++ {
		want := fmt.Sprintf("v%d\n", 150+i)
		if got := e.mustRead(sid, fmt.Sprintf("f%03d", i), t1); got != want {
			t.Fatalf("f%03d as of T: %q, want %q", i, got, want)
		}
	}
}

// The bytes of pruned content leave the store's files after a compaction.
func TestPruneThenCompactLeavesNoByte(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("bytes")
	const marker = "MARKER-pruned-c0ffee"
	e.write(sid, "big.txt", bigText(7, 300<<10, marker, 100, 200<<10))
	e.write(sid, "small.txt", []byte("old "+marker+"\n"))
	e.write(sid, "big.txt", bigText(8, 300<<10, "", 0))
	e.write(sid, "small.txt", []byte("new\n"))
	tt := e.now()
	if err := e.st.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(rawscan.Hits(t, e.dir, marker)) == 0 {
		t.Fatal("marker not on disk before the prune: the test proves nothing")
	}
	if _, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if hits := rawscan.Hits(t, e.dir, marker); len(hits) > 0 {
		t.Fatalf("pruned bytes remain in %v", hits)
	}
	if got := e.mustRead(sid, "small.txt", Latest); got != "new\n" {
		t.Fatalf("small.txt: %q", got)
	}
}

// Under a write/prune cycle the store's file stops growing: bbolt reuses
// the pages a prune freed.
func TestWritePruneCycleReusesSpace(t *testing.T) {
	t.Parallel() // its own store; no package state
	e := lcOpen(t)
	sid := e.session("cycle")
	const cycles, perCycle, size = 10, 24, 256 << 10
	var sizes []int64
	written := int64(0)
	for c := 0; c < cycles; c++ {
		for i := 0; i < perCycle; i++ {
			e.write(sid, "f.bin", bigText(int64(c*perCycle+i), size, "", 0))
			written += size
		}
		at := e.now()
		if _, err := e.st.Prune(sid, PruneOptions{Before: at, UnlinkedBefore: at}); err != nil {
			t.Fatal(err)
		}
		e.reopen() // folds the log into padfs.db
		fi, err := os.Stat(filepath.Join(e.dir, "padfs.db"))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	t.Logf("padfs.db after each cycle: %v (content written: %d)", sizes, written)
	if last := sizes[len(sizes)-1]; last > 2*sizes[2] || last > written/3 {
		t.Fatalf("padfs.db keeps growing under write/prune cycles: %v (content written: %d)", sizes, written)
	}
	if got := e.mustRead(sid, "f.bin", Latest); got != string(bigText(int64(cycles*perCycle-1), size, "", 0)) {
		t.Fatal("f.bin lost its latest content")
	}
}

// reopen closes the store (folding its log into padfs.db) and opens it
// again.
func (e *lcEnv) reopen() *Store {
	e.t.Helper()
	e.st.Close()
	st, err := OpenDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	e.st = st
	return st
}

// Prunes race with writers and as-of readers: every read as of a kept
// point sees exactly what it saw before, whatever the prune has done yet.
func TestPruneBesideWritersAndReaders(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("race")
	for i := 0; i < 300; i++ {
		e.write(sid, fmt.Sprintf("f%02d", i%30), []byte(fmt.Sprintf("before %d", i)))
	}
	tT := e.now()
	want := treeDump(t, e.st, sid, tT)
	stop := make(chan struct{})
	errs := make(chan error, 2)
	go func() { // writer
		defer func() { errs <- nil }()
		h, _ := e.st.Header(sid)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n, err := e.st.Lookup(sid, h.Root, fmt.Sprintf("f%02d", i%30), Latest)
			if err == nil {
				_, err = e.st.WriteContent(context.Background(), sid, n.Ino, strings.NewReader(fmt.Sprintf("after %d", i)), nowNs())
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	readerErr := make(chan string, 1)
	go func() { // reader of the state as of T and of a pruned point
		for {
			select {
			case <-stop:
				readerErr <- ""
				return
			default:
			}
			var got map[string]string
			err := e.st.View(func(tx *ReadTx) error {
				got = map[string]string{}
				return tx.WalkTree(sid, tT, func(en TreeEntry) error {
					c, err := tx.Content(en.Node)
					got[en.Path] = fmt.Sprintf("%x", sha256.Sum256(c))
					return err
				})
			})
			if err != nil || len(got) != len(want) {
				readerErr <- fmt.Sprintf("read as of T during the prune: %v, %d names, want %d", err, len(got), len(want))
				return
			}
		}
	}()
	r, err := e.st.Prune(sid, PruneOptions{Before: tT, UnlinkedBefore: tT})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if msg := <-readerErr; msg != "" {
		t.Fatal(msg)
	}
	if r.Versions < 270 { // 270 file versions superseded before T, and the root's
		t.Fatalf("receipt %+v", r)
	}
	if got := treeDump(t, e.st, sid, tT); !reflect.DeepEqual(got, want) {
		t.Fatalf("state as of T after a prune beside a writer:\n got %v\nwant %v", got, want)
	}
}
