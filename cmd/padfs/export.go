package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func init() {
	addCommand(newExportCmd)
	addSessionCommand(newSessionExportCmd)
}

// defaultMaxSparse is the most hole bytes one file may have in a tar
// export: archive/tar writes no sparse entries, so a hole is written as
// zeros.
const defaultMaxSparse = 1 << 30

func newExportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "export [--session ID] [--asof T] [-o FILE.tar | --to DIR] [--max-sparse BYTES]",
		Short: "Write a session's tree (as of T) as a POSIX tar, or into a host directory",
		Long: `Write the tree of a session, now or as of T (an HLC, RFC 3339 time,
checkpoint name or sequence number), as a POSIX (PAX) tar on stdout or into
FILE (-o), or as files into host directory DIR (--to).

The tar keeps modes, numeric owners, mtimes (to the nanosecond), symlinks,
devices and fifos, user.* xattrs (PAX SCHILY.xattr.* records, what GNU tar
--xattrs reads), and hard links as tar hard links. Holes are written as
zeros (archive/tar writes no sparse entries), so a file with more than
--max-sparse bytes of holes is refused, naming it: export such a tree with
--to, which leaves holes unwritten. Sockets have no tar form and are left
out (with a warning).

--to DIR creates DIR, or fills it if it is an empty directory; a non-empty
DIR is refused, so an export never mixes with or overwrites other files.
Owners are set when padfs runs as root. -o FILE is written beside FILE and
renamed into place when complete.`,
		Example: "  padfs export --session $S -o work.tar && tar --xattrs -xf work.tar -C out\n  padfs export --asof before-refactor --to /tmp/old",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sess, _ := cmd.Flags().GetString("session")
			asof, _ := cmd.Flags().GetString("asof")
			out, _ := cmd.Flags().GetString("output")
			to, _ := cmd.Flags().GetString("to")
			maxSparse, _ := cmd.Flags().GetInt64("max-sparse")
			if out != "" && to != "" {
				return fmt.Errorf("export: -o and --to exclude each other")
			}
			if (out == "" || out == "-") && to == "" && !isServed(cmd) && isTerminal(os.Stdout) {
				return fmt.Errorf("export: refusing to write a tar to a terminal (use -o FILE, --to DIR, or redirect stdout)")
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return fmt.Errorf("export: %w", err)
				}
				at := mvcc.Latest
				if asof != "" {
					if at, err = resolveAt(a, sid, "--asof", asof); err != nil {
						return err
					}
				} else if err := a.FlushMount(); err != nil {
					return fmt.Errorf("export: %w", err)
				}
				if to != "" {
					return exportDir(a, sid, at, a.Abs(to))
				}
				return writeOutput(a, out, func(w io.Writer) error {
					return exportTar(a, sid, at, w, maxSparse)
				})
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the mounted session you are in)")
	c.Flags().String("asof", "", "the point in time to export (HLC, RFC 3339 time, checkpoint, sequence number; default now)")
	c.Flags().StringP("output", "o", "", "write the tar to FILE (default: stdout)")
	c.Flags().String("to", "", "write the tree into host directory DIR (absent or empty)")
	c.Flags().Int64("max-sparse", defaultMaxSparse, "refuse a tar of a file with more hole bytes than this (0: no limit)")
	return c
}

func newSessionExportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "export ID -o FILE",
		Short: "Write a whole session (history, log, checkpoints, chunks) to one checksummed file",
		Long: `Write session ID with all of its history (every version, the log, the
checkpoints, the chunks it references) to FILE ("-": stdout), for padfs
session import in another data directory or on another machine. The file is
a stream of records, each with a CRC-32C, behind a version header and ending
with a trailer that holds the record count and a SHA-256 of the whole file.
A fork exports whole (its tree does not need its parent).`,
		Example: "  padfs session export refactor -o refactor.padfs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, _ := cmd.Flags().GetString("output")
			if out == "" {
				return fmt.Errorf("session export needs -o FILE (- for stdout)")
			}
			return withApp(cmd, func(a *App) error {
				sid, err := sessionByIDOrName(a.Store, args[0])
				if err != nil {
					return fmt.Errorf("session export: %w", err)
				}
				if err := a.FlushMount(); err != nil {
					return fmt.Errorf("session export: %w", err)
				}
				if out == "-" {
					out = ""
				}
				return writeOutput(a, out, func(w io.Writer) error {
					_, err := a.Store.ExportSession(a.Context(), sid, w)
					return err
				})
			})
		},
	}
	c.Flags().StringP("output", "o", "", "the file to write (- for stdout)")
	return c
}

// isServed reports whether cmd runs inside a mount's process for a client.
func isServed(cmd *cobra.Command) bool {
	ctx := cmd.Context()
	if ctx == nil {
		return false
	}
	_, ok := ctx.Value(servedKey).(*served)
	return ok
}

// writeOutput runs fn on a.Out (file "" or "-") or on a temporary file
// beside file that is renamed to file when fn succeeded.
func writeOutput(a *App, file string, fn func(io.Writer) error) error {
	if file == "" || file == "-" {
		return fn(a.Out)
	}
	file = a.Abs(file)
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(f.Name())
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("export to %s: %w", file, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("export to %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("export to %s: %w", file, err)
	}
	if err := os.Rename(f.Name(), file); err != nil {
		return fmt.Errorf("export to %s: %w", file, err)
	}
	return nil
}

// exportTar writes the tree as a PAX tar.
func exportTar(a *App, sid mvcc.SessionID, at mvcc.HLC, w io.Writer, maxSparse int64) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, 1<<20)
	err := a.Store.ExportTree(a.Context(), sid, at, func(e mvcc.ExportEntry) error {
		n := e.Node
		hdr := &tar.Header{Format: tar.FormatPAX, Name: e.Path, Mode: int64(n.Mode & 0o7777),
			Uid: int(n.Uid), Gid: int(n.Gid), ModTime: time.Unix(0, n.Mtime)}
		if e.Path == "." {
			hdr.Name = "./"
		}
		hdr.PAXRecords = map[string]string{}
		for _, k := range sortedKeys(e.Xattrs) { // a hard link's are its first name's
			hdr.PAXRecords["SCHILY.xattr."+k] = string(e.Xattrs[k])
		}
		switch {
		case e.LinkTo != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, e.LinkTo
		case n.IsDir():
			hdr.Typeflag = tar.TypeDir
			if e.Path != "." {
				hdr.Name += "/"
			}
		case n.IsSymlink():
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, n.Target
		case n.IsRegular():
			if holes := n.HoleBytes(); maxSparse > 0 && holes > uint64(maxSparse) {
				return fmt.Errorf("%s is a sparse file of %d bytes with %d bytes of holes (more than --max-sparse %d): a tar would hold every zero; export with --to DIR (which keeps the holes) or raise --max-sparse",
					e.Path, n.Size, holes, maxSparse)
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(n.Size)
		default:
			switch n.Mode & unix.S_IFMT {
			case unix.S_IFCHR:
				hdr.Typeflag = tar.TypeChar
			case unix.S_IFBLK:
				hdr.Typeflag = tar.TypeBlock
			case unix.S_IFIFO:
				hdr.Typeflag = tar.TypeFifo
			default:
				fmt.Fprintf(a.Err, "padfs export: %s: a socket has no tar form, left out\n", e.Path)
				return nil
			}
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(uint64(n.Rdev))), int64(unix.Minor(uint64(n.Rdev)))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if hdr.Typeflag == tar.TypeReg && n.Size > 0 {
			if _, err := io.CopyBuffer(tw, io.NewSectionReader(a.Store.Reader(n), 0, int64(n.Size)), buf); err != nil {
				return fmt.Errorf("%s: %w", e.Path, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// exportDir writes the tree into host directory dir (absent or empty).
func exportDir(a *App, sid mvcc.SessionID, at mvcc.HLC, dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("export --to %s: the directory is not empty (export into an empty or new directory)", dir)
	} else if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("export --to: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("export --to: %w", err)
	}
	root := os.Geteuid() == 0
	var dirs []mvcc.ExportEntry // attributes set last, deepest first
	buf := make([]byte, 256<<10)
	err := a.Store.ExportTree(a.Context(), sid, at, func(e mvcc.ExportEntry) error {
		p := filepath.Join(dir, e.Path)
		n := e.Node
		fail := func(err error) error { return fmt.Errorf("export --to: %s: %w", p, err) }
		if e.LinkTo != "" {
			if err := os.Link(filepath.Join(dir, e.LinkTo), p); err != nil {
				return fail(err)
			}
			return nil
		}
		switch {
		case n.IsDir():
			if e.Path != "." {
				if err := os.Mkdir(p, 0o700); err != nil {
					return fail(err)
				}
			}
			dirs = append(dirs, e)
			return nil
		case n.IsSymlink():
			if err := os.Symlink(n.Target, p); err != nil {
				return fail(err)
			}
		case n.IsRegular():
			if err := writeSparse(a.Store, n, p, buf); err != nil {
				return fail(err)
			}
		default:
			if err := unix.Mknod(p, n.Mode&^0o7777|0o600, int(n.Rdev)); err != nil {
				return fail(err)
			}
		}
		return fail2(setHostAttrs(p, e, root), fail)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		p := filepath.Join(dir, dirs[i].Path)
		if err := setHostAttrs(p, dirs[i], root); err != nil {
			return fmt.Errorf("export --to: %s: %w", p, err)
		}
	}
	return nil
}

func fail2(err error, fail func(error) error) error {
	if err != nil {
		return fail(err)
	}
	return nil
}

// writeSparse writes n's content to a new file p, leaving holes unwritten.
func writeSparse(st *mvcc.Store, n *mvcc.Inode, p string, buf []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	r := st.Reader(n)
	err = n.DataExtents(func(off, l int64) error {
		for l > 0 {
			c := min(l, int64(len(buf)))
			got, err := r.ReadAt(buf[:c], off)
			if int64(got) < c {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			if _, err := f.WriteAt(buf[:c], off); err != nil {
				return err
			}
			off, l = off+c, l-c
		}
		return nil
	})
	if err == nil {
		err = f.Truncate(int64(n.Size))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// setHostAttrs sets owner (as root), mode, xattrs and times of p.
func setHostAttrs(p string, e mvcc.ExportEntry, root bool) error {
	n := e.Node
	if root {
		if err := os.Lchown(p, int(n.Uid), int(n.Gid)); err != nil {
			return err
		}
	}
	if !n.IsSymlink() {
		if err := unix.Chmod(p, n.Mode&0o7777); err != nil {
			return err
		}
		for _, k := range sortedKeys(e.Xattrs) {
			if err := unix.Lsetxattr(p, k, e.Xattrs[k], 0); err != nil {
				return fmt.Errorf("xattr %s: %w", k, err)
			}
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(n.Atime), unix.NsecToTimespec(n.Mtime)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func sortedKeys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
