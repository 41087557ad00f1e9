package mvcc

// Key layout. The store is one ordered keyspace (mvcc/kv); every integer is
// big-endian so that byte order is numeric order, and version suffixes are
// the bitwise NOT of the HLC so that the NEWEST version sorts FIRST.
//
//	"M" name                                   -> store meta: format, HLC high-water, next inode
//	"H" sid[16]                                -> session header (created, name, parent; only the name changes, by RenameSession)
//	"Z" sid[16] ^hlc[8]                        -> session state versions (live / forgotten)
//	"N" sid[16]                                -> session counters (next event seq; derived)
//	"K" sid[16] name                           -> checkpoint name -> HLC
//	"E" sid[16] seq[8]                         -> commit log: one event per commit, no gaps
//	"D" sid[16] parent[8] name 0x00 ^hlc[8]    -> directory entry versions (ino + type, or tombstone)
//	"I" sid[16] ino[8] ^hlc[8]                 -> inode versions (attrs, content manifest)
//	"X" sid[16] ino[8] name 0x00 ^hlc[8]       -> xattr versions (value, or removed; xattr.go)
//	"C" sha256[32]                             -> content chunk, shared by every version and session
//	"R" sha256[32] sid[16]                     -> "session sid references chunk": count of its inode versions naming it (empty: not counted yet)
//	"S" sid[16] hlc[8]                         -> keys the commit at hlc superseded or made tombstones (superseded.go; for prune)
//	"P" sid[16]                                -> prune state: pruned up to, points kept, records since (prune.go)
//	"L" sid[16]                                -> live-entry index state: complete, or how far its build got (liveidx.go)
//	"L" sid[16] parent[8] name                 -> live entry: the newest entry version of a live name (ino, type, hlc)
//	"W" sid[16] ...                            -> a purge or redaction under way: where it got (job.go)
//
// How a version chain is read: see the package comment (doc.go).

import (
	"encoding/binary"

	"github.com/oklog/ulid/v2"
)

// SessionID identifies a session; ids are ULIDs.
type SessionID = ulid.ULID

// Ino is an inode number, unique across the store (forks get new numbers).
type Ino uint64

const (
	pMeta       = 'M'
	pHeader     = 'H'
	pState      = 'Z'
	pCounters   = 'N'
	pCheckpoint = 'K'
	pEvent      = 'E'
	pDentry     = 'D'
	pInode      = 'I'
	pXattr      = 'X'
	pChunk      = 'C'
	pChunkRef   = 'R'
	pSuperseded = 'S'
	pPrune      = 'P'
	pLive       = 'L'
	pJob        = 'W'
)

func key(prefix byte, parts ...[]byte) []byte { return keyRoom(0, prefix, parts...) }

// keyRoom is key with room for extra more bytes.
func keyRoom(extra int, prefix byte, parts ...[]byte) []byte {
	n := 1 + extra
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	k = append(k, prefix)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// inv encodes an HLC so that newer sorts first.
func inv(h HLC) []byte { return u64(^uint64(h)) }

// hlcFromInv decodes the last 8 bytes of a versioned key.
func hlcFromInv(k []byte) HLC { return HLC(^binary.BigEndian.Uint64(k[len(k)-8:])) }

func metaKey(name string) []byte { return key(pMeta, []byte(name)) }

func headerKey(sid SessionID) []byte { return key(pHeader, sid[:]) }

func stateKey(sid SessionID, at HLC) []byte { return key(pState, sid[:], inv(at)) }

func countersKey(sid SessionID) []byte { return key(pCounters, sid[:]) }

func checkpointKey(sid SessionID, name string) []byte {
	return key(pCheckpoint, sid[:], []byte(name))
}

func eventKey(sid SessionID, seq uint64) []byte { return key(pEvent, sid[:], u64(seq)) }

// dentryChain is the prefix shared by every version of one directory entry.
func dentryChain(sid SessionID, parent Ino, name string) []byte {
	return key(pDentry, sid[:], u64(uint64(parent)), []byte(name), []byte{0})
}

// dentryVersion is dentryChain and its version key at h, in one
// allocation (versioned).
func dentryVersion(sid SessionID, parent Ino, name string, h HLC) (chain, k []byte) {
	return versioned(keyRoom(8, pDentry, sid[:], u64(uint64(parent)), []byte(name), []byte{0}), h)
}

// inodeVersion is inodeChain and its version key at h, in one allocation.
func inodeVersion(sid SessionID, ino Ino, h HLC) (chain, k []byte) {
	return versioned(keyRoom(8, pInode, sid[:], u64(uint64(ino))), h)
}

// versioned splits a chain built with room for 8 more bytes into the
// chain, capped so that no append to it reaches the version, and its
// version key at h.
func versioned(room []byte, h HLC) (chain, k []byte) {
	return room[:len(room):len(room)], binary.BigEndian.AppendUint64(room, ^uint64(h))
}

// dirPrefix is the prefix of every entry chain of one directory.
func dirPrefix(sid SessionID, parent Ino) []byte {
	return key(pDentry, sid[:], u64(uint64(parent)))
}

func inodeChain(sid SessionID, ino Ino) []byte {
	return key(pInode, sid[:], u64(uint64(ino)))
}

func chunkKey(h Hash) []byte { return key(pChunk, h[:]) }

func chunkRefKey(h Hash, sid SessionID) []byte { return key(pChunkRef, h[:], sid[:]) }

// supersededKey is time-ordered (plain HLC, oldest first), so that pruning
// up to T reads the records of the commits up to T and no others.
func supersededKey(sid SessionID, at HLC) []byte { return key(pSuperseded, sid[:], u64(uint64(at))) }

func pruneKey(sid SessionID) []byte { return key(pPrune, sid[:]) }

// purgePrefixes lists every prefix a key of session sid could have: all
// key kinds but the store-wide ones (meta, chunks, chunk references, jobs),
// so that a purge also deletes kinds of keys added after it was written.
func purgePrefixes(sid SessionID) [][]byte {
	var out [][]byte
	for b := 0; b < 256; b++ {
		switch byte(b) {
		case pMeta, pChunk, pChunkRef, pJob:
			continue
		}
		out = append(out, key(byte(b), sid[:]))
	}
	return out
}

// sessionPrefixes lists the key prefixes that hold a session's own keys.
func sessionPrefixes(sid SessionID) [][]byte {
	var out [][]byte
	for _, p := range []byte{pHeader, pState, pCounters, pCheckpoint, pEvent, pDentry, pInode, pXattr, pSuperseded, pPrune, pLive} {
		out = append(out, key(p, sid[:]))
	}
	return out
}
