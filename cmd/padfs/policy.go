package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	padfs "github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// The retention policy of a data directory: DATA/policy.json, read by
// padfs prune --policy and, every "every", by a running mount.

func init() { addMountHook(policyMountHook) }

const policyHelp = `DATA/policy.json sets the data directory's retention policy:

  {"keep": "30d", "keep_checkpoints": true, "every": "1h", "keep_last": 10}

  keep              history to keep: every session is pruned --before this
                    long ago (a duration: 90m, 36h, 7d, 2w; or any T
                    padfs prune --before takes)
  keep_checkpoints  keep the states of named checkpoints (default true)
  every             how often a running mount applies it (default 1h)
  keep_last         also keep the last N saves of each file, however
                    old (as padfs prune --keep-last N; default 0)

A running mount rereads the file each time, so editing it needs no restart;
its log (stderr) has one line per session pruned. padfs prune --policy
applies it once. Compaction is never automatic (it stalls writers): run
padfs compact when you want the space back on the filesystem.
`

type policy struct {
	Keep            string `json:"keep"`
	KeepCheckpoints *bool  `json:"keep_checkpoints,omitempty"`
	Every           string `json:"every,omitempty"`
	KeepLast        int    `json:"keep_last,omitempty"`
}

func (p *policy) keepCheckpoints() bool { return p.KeepCheckpoints == nil || *p.KeepCheckpoints }

func (p *policy) every() time.Duration {
	if d, ok := parseAgo(p.Every); ok && d >= time.Second {
		return d
	}
	return time.Hour
}

func policyPath(dir string) string { return filepath.Join(dir, "policy.json") }

// loadPolicy returns the policy, or nil if there is none.
func loadPolicy(dir string) (*policy, error) {
	b, err := os.ReadFile(policyPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	var p policy
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("policy %s: %w", policyPath(dir), err)
	}
	if p.Keep == "" {
		return nil, fmt.Errorf("policy %s: no \"keep\"", policyPath(dir))
	}
	if p.KeepLast < 0 {
		return nil, fmt.Errorf("policy %s: keep_last %d: must be 0 or more", policyPath(dir), p.KeepLast)
	}
	return &p, nil
}

// applyPolicy prunes every session as the policy says.
func applyPolicy(a *App, p *policy) error {
	infos, err := a.Store.Sessions()
	if err != nil {
		return err
	}
	for _, si := range infos {
		if h, err := storeopen.HeldElsewhere(a.Store, si.ID); err != nil || h != nil {
			continue // only its lease holder may prune it (a mount on another host)
		}
		at, err := resolveBefore(a.Store, si.ID, p.Keep)
		if err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		r, err := a.Store.Prune(si.ID, mvcc.PruneOptions{Before: at, DropCheckpoints: !p.keepCheckpoints(), KeepLast: p.KeepLast})
		if err != nil {
			return fmt.Errorf("policy: prune session %s: %w", si.ID, err)
		}
		if r.Versions > 0 {
			a.Notify(si.ID)
			slog.Info("policy pruned", "session", si.ID.String(), "before", r.Before.String(),
				"versions", r.Versions, "chunks", r.Chunks, "bytes", r.Bytes, "kept_last", r.KeptLast)
		}
	}
	return nil
}

// policyMountHook puts the disk-full reserve in place and applies the
// policy in the background while the mount runs (not in a mount --asof).
func policyMountHook(a *App, o *padfs.Options) (func(), error) {
	restoreReserve(a.Dir)
	if o.AsOf != nil {
		return nil, nil // a read-only view of the past: leave its history alone
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		wait := time.Minute
		for {
			p, err := loadPolicy(a.Dir)
			if err != nil {
				slog.Warn("retention policy", "err", err)
			} else if p != nil {
				wait = p.every()
			}
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			if p, err = loadPolicy(a.Dir); err == nil && p != nil {
				if err := applyPolicy(a, p); err != nil {
					slog.Warn("retention policy", "err", err)
				}
			}
			restoreReserve(a.Dir)
		}
	}()
	return func() { close(stop); <-done }, nil
}
