// Package mvcc is padfs's versioned store: sessions, each a POSIX tree
// (directory entries, inodes, extended attributes, content) kept as
// versions, and a commit log, on top of an ordered transactional key-value
// store (mvcc/kv: the WAL over bbolt embedded, or PostgreSQL).
//
// Everything is a version. A commit (Store.Update) takes one HLC inside the
// KV's write serialization, so HLC order is commit order; it writes new
// records stamped with it, records what they superseded (for Prune), and
// appends exactly one Event to its session's log (Op says what it did).
// Nothing is rewritten in place, except by the operations that exist to do
// so (Prune, Purge, Redact). Reading now and reading as of T are the same
// code with a different T (Latest is the newest).
//
// Directory entries (session, parent inode, name) and inodes (session,
// inode) each have a version chain, keyed so that byte order is time order,
// newest first; keys.go has the whole key table. The chain of the entry
// "main.go" in directory 7 of session S:
//
//	D S 7 "main.go" 0x00 ^t3  -> {ino 42}        <- newest: one Seek from ^Latest finds it
//	D S 7 "main.go" 0x00 ^t2  -> tombstone        (unlinked at t2, superseded at t3)
//	D S 7 "main.go" 0x00 ^t1  -> {ino 40}         (created at t1, superseded at t2)
//
// Reading as of T is the same Seek from ^T: the first key still inside the
// chain is the newest version at or before T. A version is superseded at the
// HLC of the version above it. Names cannot contain 0x00, so "a\x00" sorts
// before "ab\x00" and chains never interleave.
//
// Content is a list of chunks (content-defined, SHA-256 addressed) stored
// once and shared by every version and session that names them; a
// per-session reference count frees them. Sessions are key prefixes: a
// fork records its parent and the HLC it came from and copies the tree as
// of then (metadata, with new inode numbers), never the chunk bytes.
//
// Errors are sentinel values (ErrNotFound, ErrExist, ...; errors.go) that
// callers test with errors.Is; the fs package maps them to errno.
package mvcc
