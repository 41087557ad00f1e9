package main

import (
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() { addCommand(newDuCmd) }

// duRow is one session in padfs du --json.
type duRow struct {
	Session string `json:"session"`
	Name    string `json:"name,omitempty"`
	Files   int64  `json:"files"`
	Bytes   int64  `json:"bytes"` // sum of the latest tree's file sizes
	// History is what padfs prune --before T --keep-last N would free:
	// the versions that only past states read, and the chunks only they
	// name. KeptLast is the versions superseded before T that N keeps.
	HistoryVersions int   `json:"history_versions"`
	HistoryChunks   int   `json:"history_chunks"`
	HistoryBytes    int64 `json:"history_bytes"`
	KeepLast        int   `json:"keep_last"`
	KeptLast        int   `json:"kept_last"`
	// PrunedTo is the session's prune point, if it was pruned.
	PrunedTo string `json:"pruned_to,omitempty"`
}

func newDuCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "du [--session ID | --all] [--before T] [--keep-last N] [--json]",
		Short: "Show how much of the store each session's latest tree and its history take",
		Long: `For each session: the files and bytes of its latest tree, and its history:
the versions, chunks and bytes (keys, values and chunks) that padfs prune
--before T --keep-last N would free (it computes exactly that prune, dry, so
it reads the session's records). T is now unless --before says otherwise; N
is --keep-last, else the policy's keep_last (DATA/policy.json), else 0.
Then the sizes of the files of the data directory:
padfs.db (including pages freed by prunes and not yet reused; padfs compact
gives them back) with the disk space it takes (bbolt grows the file ahead of
its data, sparse), the write-ahead log and the search index. Without
--session or --all: the session of the mount you are in, else every session.`,
		Args: cobra.NoArgs,
		RunE: runDu,
	}
	c.Flags().String("session", "", "session id or name")
	c.Flags().Bool("all", false, "every session")
	c.Flags().Bool("json", false, "machine-readable output")
	c.Flags().String("before", "", "T of the prune whose savings the history column shows (default: now)")
	c.Flags().Int("keep-last", 0, "N of that prune's --keep-last (default: the policy's keep_last)")
	return c
}

// runDu is du: a row per session, then the data directory's files.
func runDu(cmd *cobra.Command, args []string) error {
	sess, _ := cmd.Flags().GetString("session")
	all, _ := cmd.Flags().GetBool("all")
	asJSON, _ := cmd.Flags().GetBool("json")
	before, _ := cmd.Flags().GetString("before")
	keepLast, _ := cmd.Flags().GetInt("keep-last")
	if keepLast < 0 {
		return fmt.Errorf("--keep-last %d: must be 0 or more", keepLast)
	}
	return withApp(cmd, func(a *App) error {
		if !cmd.Flags().Changed("keep-last") {
			// What the policy's prunes would keep.
			pol, err := loadPolicy(a.Dir)
			if err != nil {
				return err
			}
			if pol != nil {
				keepLast = pol.KeepLast
			}
		}
		var sids []mvcc.SessionID
		if sess != "" || (!all && a.Mount != nil && a.Mount.Session != "") {
			sid, err := pickSession(a, sess)
			if err != nil {
				return err
			}
			sids = append(sids, sid)
		} else {
			infos, err := a.Store.Sessions()
			if err != nil {
				return err
			}
			for _, si := range infos {
				sids = append(sids, si.ID)
			}
		}
		var rows []duRow
		for _, sid := range sids {
			row, err := duSession(a.Store, sid, before, keepLast)
			if err != nil {
				return fmt.Errorf("session %s: %w", sid, err)
			}
			rows = append(rows, row)
		}
		files, onDisk := map[string]int64{}, map[string]int64{}
		files["padfs.db"], onDisk["padfs.db"] = fileUsage(filepath.Join(a.Dir, "padfs.db"))
		for _, d := range []string{"wal", "index"} {
			files[d], onDisk[d] = dirUsage(filepath.Join(a.Dir, d))
		}
		if asJSON {
			return writeJSON(a.Out, map[string]any{"sessions": rows, "files": files, "files_on_disk": onDisk})
		}
		tw := tabwriter.NewWriter(a.Out, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tNAME\tFILES\tBYTES\tHISTORY BYTES\tHISTORY VERSIONS\tPRUNED TO")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Session, r.Name, r.Files, r.Bytes,
				r.HistoryBytes, r.HistoryVersions, r.PrunedTo)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if keepLast > 0 {
			if _, err := fmt.Fprintf(a.Out, "history: what a prune keeping each file's last %d saves would free\n", keepLast); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(a.Out, "padfs.db %d bytes (on disk %d), wal %d bytes, index %d bytes\n",
			files["padfs.db"], onDisk["padfs.db"], files["wal"], files["index"])
		return err
	})
}

// duSession is one session's row: its latest tree, and what a dry prune
// before T keeping the last keepLast saves would free.
func duSession(st *mvcc.Store, sid mvcc.SessionID, before string, keepLast int) (duRow, error) {
	h, err := st.Header(sid)
	if err != nil {
		return duRow{}, err
	}
	row := duRow{Session: sid.String(), Name: h.Name, KeepLast: keepLast}
	var sr sessionRow
	if err := st.View(func(t *mvcc.ReadTx) error { return countTree(t, sid, h.Root, &sr) }); err != nil {
		return row, err
	}
	row.Files, row.Bytes = sr.Files, sr.Bytes
	at := mvcc.Latest // capped at now
	if before != "" {
		if at, err = resolveBefore(st, sid, before); err != nil {
			return row, err
		}
	}
	r, err := st.Prune(sid, mvcc.PruneOptions{Before: at, DryRun: true, KeepLast: keepLast})
	if err != nil {
		return row, err
	}
	row.HistoryVersions, row.HistoryChunks, row.HistoryBytes = r.Versions, r.Chunks, r.Bytes
	row.KeptLast = r.KeptLast
	if to, _, err := st.PrunedTo(sid); err != nil {
		return row, err
	} else if to != 0 {
		row.PrunedTo = to.String()
	}
	return row, nil
}

// dirUsage is fileUsage summed over a directory's regular files.
func dirUsage(dir string) (size, onDisk int64) {
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
			onDisk += blocksOf(fi)
		}
		return nil
	})
	return size, onDisk
}
