package mvcc

import "github.com/padfs/padfs/mvcc/kv"

// Metadata-only commits (no file content: names, modes, owners, times,
// xattrs) of a live session may return before their transaction commits
// on drivers that can defer (kv.Deferrer: PostgreSQL), so that a stream of
// them (rm, mv, mkdir -p, chmod -R, git's renames) shares one transaction
// and its round trip instead of one each. A commit of content (a write, a
// close, a truncate, a create with its content) or of anything else still
// returns only once it has committed, and so commits every deferred one
// before it: what a returned close(2) or fsync(2) promises is unchanged.
// See kv.Deferrer for what a deferred commit promises.

// deferrable reports whether a commit with event op may be deferred.
func deferrable(op Op) bool {
	switch op {
	case OpMkdir, OpSymlink, OpLink, OpUnlink, OpRmdir, OpRename, OpExchange,
		OpChmod, OpChown, OpUtimens, OpSetxattr, OpRemovexattr:
		return true
	}
	return false
}

// deferIfMetadata marks the commit t (to be ended with event op) deferrable
// when it is a metadata-only commit of a live session.
func deferIfMetadata(tx kv.Txn, kind commitKind, op Op) {
	if kind == commitLive && deferrable(op) {
		kv.Defer(tx)
	}
}
