// Package wal is a group-commit layer: a kv.Store that buffers Updates in
// memory and in an append-only log, and moves them to another kv.Store (the
// base, normally bolt) in one base transaction about once a second.
//
// It exists for writers that make thousands of tiny Updates (tar -x): each
// pays one write(2) of one log record instead of one fsync.
//
//	Update ──1 record, 1 write(2)──> WAL segment   (dir/0000000000000007.wal)
//	   └────then─────> active memtable ──freeze──> frozen memtable ──1 base.Update──> base
//
//	View reads:  active snapshot  >  frozen  >  base View   (first hit wins;
//	Txn reads:   own writes > active > frozen > base         tombstones hide)
//
// # Guarantees
//
//   - Process crash (kill -9, panic): nothing is lost once Update has
//     returned. The record is in the kernel's page cache; Open replays it.
//   - Power loss or kernel crash: everything committed before the last
//     returned Sync is kept, and what survives is always a prefix of the
//     commits (Update order). Sync is one fdatasync of the current segment,
//     much cheaper than a base commit. A flush also makes its batch durable
//     (the base commits with fsync).
//   - The base is never inconsistent: it only changes by whole base
//     transactions (one per flush, one for the replay at Open), and replaying
//     a record twice is harmless because records hold absolute puts and
//     deletes.
//   - Readers never see a gap: a frozen memtable stays readable until its
//     batch has committed to the base and its segment is deleted.
//
// Updates are serialized; they wait for a flush only when a second
// memtable fills up before the first has reached the base. Views never wait
// for Updates. A Scan inside an Update does not see keys that its own
// callback writes ahead of it.
//
// Every segment but the newest is fdatasync'ed before a newer one gets its
// first record, so after a power loss only the newest can end in a torn
// record; Open drops that tail: a bad record at the end of the newest
// segment with no valid record at any later offset. A bad record anywhere
// else (in an older segment, or with valid records after it) is damage:
// Open fails with a *CorruptError (ErrCorrupt) naming the file and offset,
// and Salvage keeps the log before it and moves the rest to a quarantine
// directory, listing the writes lost.
//
// After every fold the WAL records the base's kv.Generation in dir/STATE
// (atomically: a temporary file, fdatasync, rename, directory fsync); Open
// refuses a base in the same file with an older transaction id
// (*RollbackError, ErrRolledBack), e.g. bbolt fallen back to its older meta
// page. On a full disk, a write fails with ENOSPC and changes nothing, a
// failed fold keeps the log, 1 MiB held in dir/RESERVE is released for a
// small record (an unlink) that finds no space, and an Open that cannot
// fold the log into the base serves it from memory until a flush succeeds.
//
// # Record format
//
//	record  = len u32le | crc u32le (CRC-32C over len and payload) | payload
//	payload = uvarint count | count × op
//	op      = 1 (put) | uvarint klen | key | uvarint vlen | value
//	        | 2 (delete) | uvarint klen | key
//
// Open takes ownership of the base: Close flushes and closes it too.
package wal
