package mvcc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// Destructive jobs: a hard forget (purge.go) or a redaction (redact.go) of
// a session runs as a job in bounded steps, so that writers of other
// sessions wait at most one short batch at a time:
//
//  0. The plan: the receipt recomputed (to check the token) in short read
//     transactions with pauses between them (planstep.go).
//  1. The mark. One transaction checks that the session did not change
//     since the receipt, writes the job record "W" sid and sets the
//     header's Busy field. From then on the session is invisible: Header
//     (and so every read, mount, fork, prune and commit of it) fails with
//     ErrBusy (wrapping ErrNoSession), and Sessions leaves it out.
//  2. Batches. Each is its own write transaction of at most jobBatch keys,
//     and records in the job record how far it got (phase, cursor, counts)
//     in that same transaction; a pause as long as the batch follows
//     (pace, as prune does), so waiting writers get the lock in between.
//  3. The end: the job record goes, with the header (purge) or its Busy
//     field (redaction), in one transaction; then the storage is compacted.
//
// A job cut short (kill -9, power loss, a cancelled context) resumes where
// its last batch left off: Jobs lists the marked sessions and FinishJob
// finishes one (padfs resumes them when it opens the store).
//
//	"W" sid[16]             -> job: kind, phase, cursor, counts (and a redaction's text)
//	"W" sid[16] 'h' hash    -> redaction: old content hash -> new content hash and size
//	"W" sid[16] 'c' sha256  -> redaction: a chunk the rewritten versions stopped naming

// ErrBusy means a session is being purged or redacted: it cannot be read,
// mounted or changed until the job finishes (FinishJob).
var ErrBusy = errors.New("session is being purged or redacted")

// Job kinds, as in SessionHeader.Busy.
const (
	JobPurge  = "purging"
	JobRedact = "redacting"
)

// jobBatch bounds the keys one batch of a job writes or deletes: the WAL
// record of a batch of deletions then stays well under the size a full
// disk's reserve takes (kv/wal reserveUse).
const jobBatch = 512

// jobBatchTime bounds a batch's time as well (once it has done one unit):
// other sessions' writers wait for the batch in progress, and a batch's
// keys cost from microseconds (small records) to more (a chunk's
// references looked up, cold pages of the file read).
var jobBatchTime = 2 * time.Millisecond

// jobDone is the phase of a job whose last batch deleted its record.
const jobDone = -1

// jobState is the "W" sid record.
type jobState struct {
	Kind  string `cbor:"1,keyasint"`
	Token string `cbor:"2,keyasint"`
	// At is the HLC of the mark (a redaction stamps ContentHLC with it).
	At HLC `cbor:"3,keyasint"`
	// Phase and Cursor say where the next batch starts (Pos: the next chunk
	// of the version at Cursor, for a version with many chunks).
	Phase  int    `cbor:"4,keyasint,omitempty"`
	Cursor []byte `cbor:"5,keyasint,omitempty"`
	Pos    int    `cbor:"6,keyasint,omitempty"`
	// Batches done; Done out of Total units (keys) for progress.
	Batches int64 `cbor:"7,keyasint,omitempty"`
	Done    int64 `cbor:"8,keyasint,omitempty"`
	Total   int64 `cbor:"9,keyasint,omitempty"`
	// A redaction's text and replacement: a resume needs them. They go
	// with the record at the end, and the compaction after it.
	Needle string `cbor:"10,keyasint,omitempty"`
	Repl   string `cbor:"11,keyasint,omitempty"`
	// What the job removed so far (the receipt it returns).
	Purge  *PurgeReceipt  `cbor:"12,keyasint,omitempty"`
	Redact *RedactReceipt `cbor:"13,keyasint,omitempty"`

	// deadline ends the batch under way (jobBatchTime); not stored.
	deadline time.Time
}

// late reports whether the batch under way has used its time.
func (j *jobState) late() bool { return !j.deadline.IsZero() && time.Now().After(j.deadline) }

func jobKey(sid SessionID) []byte { return key(pJob, sid[:]) }

func readJob(r kv.Reader, sid SessionID) (*jobState, error) {
	k := jobKey(sid)
	v, err := r.Get(k)
	if err != nil || v == nil {
		return nil, err
	}
	var j jobState
	if err := decode(k, v, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// viewJob reads the job record of sid in a transaction of its own; nil if
// there is none.
func (s *Store) viewJob(sid SessionID) (j *jobState, err error) {
	err = s.kv.View(func(r kv.Reader) error {
		j, err = readJob(r, sid)
		return err
	})
	return j, err
}

func writeJob(tx kv.Txn, sid SessionID, j *jobState) error {
	b, err := encode(j)
	if err != nil {
		return fmt.Errorf("mvcc: encode job of session %s: %w", sid, err)
	}
	return tx.Put(jobKey(sid), b)
}

// checkJobKey checks a "W" key and its value (fsck).
func checkJobKey(k, v []byte) error {
	switch {
	case len(k) == 1+16:
		var j jobState
		return decode(k, v, &j)
	case len(k) == 1+16+1+32 && k[17] == 'h':
		var h redactedHash
		return decode(k, v, &h)
	case len(k) == 1+16+1+32 && k[17] == 'c':
		return nil
	}
	return fmt.Errorf("malformed job key")
}

// rawHeader is Header without the Busy check (for the jobs themselves).
func (t *ReadTx) rawHeader(sid SessionID) (*SessionHeader, error) {
	k := headerKey(sid)
	v, err := t.r.Get(k)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoSession, sid)
	}
	var h SessionHeader
	if err := decode(k, v, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

func busyError(sid SessionID, kind string) error {
	what := "purged (hard forget)"
	if kind == JobRedact {
		what = "redacted"
	}
	return fmt.Errorf("%w: %w: session %s is being %s; padfs finishes that when it next opens the store (or run the command again)",
		ErrNoSession, ErrBusy, sid, what)
}

// markJobLocked starts job j on session sid, inside tx: the session must
// not have changed since the receipt (its last event is lastSeq), nor be
// busy already.
func (s *Store) markJobLocked(tx kv.Txn, sid SessionID, lastSeq uint64, j *jobState) error {
	t := &ReadTx{s: s, r: tx}
	h, err := t.rawHeader(sid)
	if err != nil {
		return err
	}
	if h.Busy != "" {
		return busyError(sid, h.Busy)
	}
	if seq, _, err := t.LastEvent(sid); err != nil {
		return err
	} else if seq != lastSeq {
		return fmt.Errorf("%w: session %s changed since the receipt", ErrToken, sid)
	}
	if j.At, err = s.tickLocked(tx); err != nil {
		return err
	}
	h.Busy = j.Kind
	b, err := encode(h)
	if err != nil {
		return err
	}
	if err := tx.Put(headerKey(sid), b); err != nil {
		return err
	}
	s.paths.drop(sid)
	s.dropPruneCache(sid)
	return writeJob(tx, sid, j)
}

// markJob commits the mark of job j on session sid (markJobLocked).
func (s *Store) markJob(sid SessionID, lastSeq uint64, j *jobState) error {
	t0 := time.Now()
	err := s.kv.Update(func(tx kv.Txn) error { return s.markJobLocked(tx, sid, lastSeq, j) })
	if err == nil && s.jobHook != nil {
		s.jobHook("mark", 0, time.Since(t0))
	}
	return err
}

// Job is a purge or redaction under way (or cut short).
type Job struct {
	Session SessionID
	Name    string
	Kind    string // JobPurge or JobRedact
	Batches int64
	Done    int64
	Total   int64
}

// Jobs lists the sessions marked for a purge or redaction that has not
// finished.
func (s *Store) Jobs() ([]Job, error) {
	var out []Job
	err := s.View(func(t *ReadTx) error {
		end := kv.PrefixEnd([]byte{pJob})
		for pos := []byte{pJob}; ; {
			var k, v []byte
			if err := t.r.Scan(pos, end, func(kk, vv []byte) (bool, error) {
				k, v = append([]byte(nil), kk...), append([]byte(nil), vv...)
				return false, nil
			}); err != nil || k == nil {
				return err
			}
			if len(k) < 1+16 {
				return fmt.Errorf("%w: job key %q", ErrCorrupt, k)
			}
			var sid SessionID
			copy(sid[:], k[1:17])
			pos = kv.PrefixEnd(k[:17]) // past the session's side records
			if len(k) != 1+16 {
				continue // side records without their job: the job ended
			}
			var j jobState
			if err := decode(k, v, &j); err != nil {
				return err
			}
			jb := Job{Session: sid, Kind: j.Kind, Batches: j.Batches, Done: j.Done, Total: j.Total}
			if h, err := t.rawHeader(sid); err == nil {
				jb.Name = h.Name
			}
			out = append(out, jb)
		}
	})
	return out, err
}

// FinishJob finishes the job marked on session sid and returns its receipt
// (a *PurgeReceipt or *RedactReceipt).
func (s *Store) FinishJob(ctx context.Context, sid SessionID, progress Progress) (any, error) {
	j, err := s.viewJob(sid)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("%w: no purge or redaction of session %s is under way", ErrNotFound, sid)
	}
	switch j.Kind {
	case JobPurge:
		return s.runPurge(ctx, sid, progress)
	case JobRedact:
		return s.runRedact(ctx, sid, progress)
	}
	return nil, fmt.Errorf("%w: job %q of session %s", ErrCorrupt, j.Kind, sid)
}

// jobStep runs the batches of the job on sid until fn says there is no
// more to do. fn gets the job record read in the batch's transaction,
// changes it (how far it got) and the record is written back in the same
// transaction. prepare, if set, runs before each batch, outside any
// transaction, with the record as the batch will find it (a redaction
// stores new content there). Between batches it pauses as long as the
// batch and its prepare took (at most 10 ms, as prune does) and checks ctx.
func (s *Store) jobStep(ctx context.Context, sid SessionID, stage string, progress Progress,
	prepare func(j *jobState) error, fn func(tx kv.Txn, j *jobState) (more bool, err error)) error {
	for more := true; more; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("the %s of session %s stopped between two batches (it resumes at the next open of the store): %w",
				stage, sid, err)
		}
		t0 := time.Now()
		if prepare != nil {
			j, err := s.viewJob(sid)
			if err != nil {
				return err
			}
			if j == nil {
				return fmt.Errorf("%w: the job record of session %s vanished", ErrCorrupt, sid)
			}
			if err := prepare(j); err != nil {
				return err
			}
		}
		var j *jobState
		var t1 time.Time
		err := s.kv.Update(func(tx kv.Txn) error {
			var err error
			t1 = time.Now()
			if j, err = readJob(tx, sid); err != nil {
				return err
			}
			if j == nil {
				return fmt.Errorf("%w: the job record of session %s vanished", ErrCorrupt, sid)
			}
			j.deadline = t1.Add(jobBatchTime)
			if more, err = fn(tx, j); err != nil {
				return err
			}
			j.Batches++
			if j.Phase == jobDone {
				return nil // fn deleted the record with the job's last keys
			}
			return writeJob(tx, sid, j)
		})
		if err != nil {
			return err
		}
		progress.report(stage, j.Done, max(j.Total, j.Done))
		if s.batchHook != nil {
			s.batchHook(stage, j.Batches, time.Since(t1))
		}
		pace(t0)
	}
	return nil
}

// compactAfter compacts the storage after a job's last batch, so that no
// freed page still holds what it deleted.
func (s *Store) compactAfter(sid SessionID, what string, progress Progress) error {
	if err := s.compactKV(func(done, total int64) { progress.report("compact", done, total) }); err != nil {
		return fmt.Errorf("session %s was %s, but compacting its files failed (deleted bytes may remain on disk until a compaction succeeds: padfs compact): %w",
			sid, what, err)
	}
	return nil
}
