package mvcc

import "strings"

// Op is an event's operation: what the commit did. It is stored as its
// text, so an event written by a newer padfs decodes to an Op that is none
// of these constants; readers must handle that (Known), not assume it.
type Op string

// Tree operations carry the POSIX names.
const (
	OpCreate      Op = "create" // a regular file (Detail "tmpfile": O_TMPFILE, no name; "with content": its first content, Size and Hash, in the same commit)
	OpMkdir       Op = "mkdir"
	OpSymlink     Op = "symlink" // Path2: the target
	OpLink        Op = "link"    // Path: an existing name, Path2: the new one
	OpUnlink      Op = "unlink"
	OpRmdir       Op = "rmdir"
	OpRename      Op = "rename"   // Path -> Path2 (Detail "whiteout": one left at Path)
	OpExchange    Op = "exchange" // Path <-> Path2
	OpWrite       Op = "write"
	OpTruncate    Op = "truncate"
	OpSetattr     Op = "setattr"
	OpChmod       Op = "chmod"
	OpChown       Op = "chown"
	OpUtimens     Op = "utimens"
	OpSetxattr    Op = "setxattr" // Detail: the attribute's name
	OpRemovexattr Op = "removexattr"
	// OpRestore is the event of a Restore commit: Path is the first path
	// restored ("." for the whole tree), Also the others, Detail "as of T"
	// and, for a reader of the text, any further paths.
	OpRestore Op = "restore"
)

// Session-level operations; session.create is written by CreateSession.
const (
	OpSessionCreate Op = "session.create"
	OpFork          Op = "session.fork"
	OpCheckpoint    Op = "session.checkpoint"
	OpForget        Op = "session.forget"
	OpRedact        Op = "session.redact"
	// OpSessionRename is the event of RenameSession (Detail: "OLD -> NEW").
	OpSessionRename Op = "session.rename"
	// OpImport is the event of ImportTree (Path2: the host directory,
	// Detail: the name) and of nothing else: a session imported from an
	// archive (ImportSession) keeps its own log.
	OpImport Op = "session.import"
)

var knownOps = map[Op]bool{
	OpCreate: true, OpMkdir: true, OpSymlink: true, OpLink: true, OpUnlink: true, OpRmdir: true,
	OpRename: true, OpExchange: true, OpWrite: true, OpTruncate: true, OpSetattr: true, OpChmod: true,
	OpChown: true, OpUtimens: true, OpSetxattr: true, OpRemovexattr: true, OpRestore: true,
	OpSessionCreate: true, OpFork: true, OpCheckpoint: true, OpForget: true, OpRedact: true,
	OpSessionRename: true, OpImport: true,
}

// Known reports whether this padfs writes o.
func (o Op) Known() bool { return knownOps[o] }

// Session reports whether o is a session-level operation (it changes no
// path of the tree by name).
func (o Op) Session() bool { return strings.HasPrefix(string(o), "session.") }

// restoreAlsoSep joins a multi-root restore's further roots in Detail.
// Events before Also named them only there.
const restoreAlsoSep = "; also "

// RestoredRoots returns the paths a restore event restored. ok is false
// for a restore written before events carried Also that restored several
// roots: Detail names them, but paths may hold the separator, so they are
// not recovered from it.
func (ev Event) RestoredRoots() (roots []string, ok bool) {
	if ev.Path == "" {
		return nil, false
	}
	if len(ev.Also) == 0 && strings.Contains(ev.Detail, restoreAlsoSep) {
		return nil, false
	}
	return append([]string{ev.Path}, ev.Also...), true
}
