package wal

import (
	"errors"
	"fmt"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// flusher moves buffered writes to the base every FlushInterval, or sooner
// when a memtable fills up, until Close.
func (s *Store) flusher() {
	defer close(s.done)
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		case <-s.kick:
		}
		err := s.flush()
		switch {
		case err != nil && !failing:
			s.log.Warn("kv/wal: flush failed; writes stay in the log, retrying", "dir", s.dir, "err", err)
		case err == nil && failing:
			s.log.Info("kv/wal: flush works again", "dir", s.dir)
		}
		failing = err != nil
		s.mu.Lock()
		full := s.active.size >= s.opts.MemtableSize
		s.mu.Unlock()
		if full && err == nil {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}

// Flush moves every Update committed before the call into the base.
func (s *Store) Flush() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return kv.ErrClosed
	}
	return s.flushAll()
}

func (s *Store) flushAll() error {
	// A frozen memtable left by a failed flush goes first; then the active
	// one, which holds everything committed before this call.
	s.mu.Lock()
	retry := s.frozen != nil
	s.mu.Unlock()
	if err := s.flush(); err != nil || !retry {
		return err
	}
	return s.flush()
}

// flush freezes the active memtable (unless a failed flush left one
// frozen), commits it to the base (fold), deletes its segment and only then
// stops reading it: at every instant each write is visible in a memtable,
// the base, or both.
func (s *Store) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	fr := s.frozen
	s.mu.Unlock()
	if fr == nil {
		fr = s.freeze()
	} else {
		// A failed flush left fr: fold it together with what came since,
		// net of it. On a full disk that is what lets a deletion free
		// space: a put the log holds and a later record deletes never
		// reaches the base, which could not take it.
		fr = s.freezeOnto(fr)
	}
	if fr == nil {
		return nil
	}

	err := s.fold(fr)
	var seq uint64
	if done := append(fr.kept[:len(fr.kept):len(fr.kept)], fr.seg); err == nil {
		if fr.seg == nil {
			done = fr.kept
		}
		if len(done) > 0 {
			seq = done[len(done)-1].seq
		}
		err = removeSegments(s.dir, done)
	}
	if err != nil {
		err = fmt.Errorf("kv/wal %s: flush: %w", s.dir, err)
		s.mu.Lock()
		s.flushErr, s.folded = err, 0 // a retry folds it all again
		s.flushed.Broadcast()
		s.mu.Unlock()
		return err
	}
	s.viewMu.Lock()
	s.mu.Lock()
	s.frozen, s.flushErr, s.folded = nil, nil, 0
	s.flushed.Broadcast()
	s.mu.Unlock()
	s.viewMu.Unlock()
	s.noteFold(seq)
	s.keepReserve()
	return nil
}

// foldBatch bounds one base transaction of a fold, by the memtable's size
// estimate.
const foldBatch = 16 << 20

// fold commits fr to the base in transactions of about foldBatch each,
// pausing after each but the last as long as it took (unless the active
// memtable is half full). A memtable bigger
// than that is the backlog of a compaction (every commit during its copy):
// folded in one transaction it kept both CPUs and the disk busy for a
// second or more, and right after a 256 MiB redaction's compaction a
// writer waited up to 520 ms (217 ms of it for a CPU). Until the last part is
// in, readers still see all of fr in its memtable, and replay after a crash
// applies the whole segment again: a part in the base alone is harmless.
func (s *Store) fold(fr *memtable) error {
	var from []byte // the key where the next part starts; nil: at the beginning
	for {
		t0 := time.Now()
		var next []byte
		var partSize int64
		err := s.base.Update(func(tx kv.Txn) error {
			next, partSize = nil, 0
			var err error
			put := func(e entry) bool {
				if partSize >= foldBatch {
					next = e.key
					return false
				}
				if e.del {
					err = tx.Delete(e.key)
				} else {
					// An entry's bytes never change and fr outlives the transaction.
					err = kv.PutStable(tx, e.key, e.val)
				}
				partSize += e.size()
				return err == nil
			}
			fr.tree.Ascend(from, put)
			return err
		})
		if err != nil || next == nil {
			return err
		}
		from = next
		// No pause when writers may soon need the memtable room this
		// fold frees (a stream of writes): then it goes at full speed.
		s.mu.Lock()
		s.folded += partSize
		s.flushed.Broadcast() // writers waiting for room (fullLocked)
		room := s.active.size < s.opts.MemtableSize/2
		s.mu.Unlock()
		if room {
			time.Sleep(time.Since(t0))
		}
	}
}

// freeze seals the current segment and swaps in an empty memtable. It
// returns the frozen memtable, or nil if there was nothing to flush.
func (s *Store) freeze() *memtable {
	// Sync most of the segment before taking writeMu so that Updates only
	// wait for what arrives in between.
	s.mu.Lock()
	g := s.seg
	s.mu.Unlock()
	if g != nil {
		if err := g.sync(); err != nil {
			s.markBroken(err)
		}
	}
	return s.swapActive(func(act *memtable) *memtable { return act })
}

// freezeOnto merges the active memtable into fr, the frozen one a failed
// flush left (newer writes win), seals the current segment and swaps in an
// empty memtable. It returns the merged memtable, now the frozen one.
func (s *Store) freezeOnto(fr *memtable) *memtable {
	m := s.swapActive(func(act *memtable) *memtable {
		// Readers may hold fr.tree and act.tree: both stay as they are.
		m := &memtable{tree: fr.tree.Copy(), size: fr.size, seg: act.seg}
		m.kept = append([]*segment(nil), fr.kept...)
		if fr.seg != nil {
			m.kept = append(m.kept, fr.seg)
		}
		m.kept = append(m.kept, act.kept...)
		act.tree.Scan(func(e entry) bool {
			m.set(e)
			return true
		})
		return m
	})
	if m == nil {
		return fr
	}
	return m
}

// swapActive seals the current segment and replaces the active memtable
// with an empty one; frozen makes the new frozen memtable from the old
// active one. It returns that, or nil (and changes nothing) when the
// active memtable is empty.
func (s *Store) swapActive(frozen func(act *memtable) *memtable) *memtable {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	g, empty := s.seg, s.active.tree.Len() == 0
	s.mu.Unlock()
	if empty {
		return nil
	}
	if g != nil {
		// A newer segment may get records only once this one is durable:
		// then only the newest segment can end torn after a power loss.
		// If the sync fails the memtable still reaches the base below.
		if err := g.seal(); err != nil {
			s.markBroken(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := frozen(s.active)
	s.seg, s.active, s.frozen, s.snap = nil, newMemtable(), m, nil
	return m
}

// Compact flushes every buffered write, so that deleted data leaves the
// log, then compacts the base. No flush runs meanwhile: Updates collect in
// the active memtable (past MemtableSize, if need be) instead of waiting
// for the copy, and the fold record cannot interleave with a flush's.
func (s *Store) Compact(progress func(done, total int64)) error {
	c, ok := s.base.(kv.Compactor)
	if !ok {
		return fmt.Errorf("kv/wal %s: base %T cannot compact: %w", s.dir, s.base, errors.ErrUnsupported)
	}
	if err := s.Flush(); err != nil {
		return err
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.compacting.Store(true)
	defer s.compacting.Store(false)
	// The copy is a new file: its transaction ids start again.
	err := c.Compact(progress)
	s.noteFold(0)
	return err
}

// MinFormat is the base's (kv.MinFormater): the base's files are what an
// older padfs would misread.
func (s *Store) MinFormat() uint64 {
	if m, ok := s.base.(kv.MinFormater); ok {
		return m.MinFormat()
	}
	return 0
}
