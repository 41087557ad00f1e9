package main

import (
	"context"
	"fmt"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// infos describes every mount the set serves now.
func (s *mountSet) infos() []MountInfo {
	ms, _ := s.running()
	out := make([]MountInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.info)
	}
	return out
}

// refuseMountedRW fails when session sid is mounted read-write: by any
// mount of the running padfs process (its first mount or a further `padfs
// mount` it serves), or, on a shared store, by whoever holds the session's
// lease (a mount on another host). A mount of all sessions does not count.
func refuseMountedRW(a *App, sid mvcc.SessionID) error {
	var ms []MountInfo
	if a.Mounts != nil {
		ms = a.Mounts()
	} else if a.Mount != nil {
		ms = []MountInfo{*a.Mount}
	}
	for _, m := range ms {
		if m.Session == sid.String() && m.AsOf == "" {
			return fmt.Errorf("session %s is mounted read-write at %s (padfs pid %d): unmount it first, or give --force",
				sid, m.Mountpoint, m.Pid)
		}
	}
	pg, ok := storeopen.Postgres(a.Store)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := pg.Holder(ctx, sid.String())
	if err != nil {
		return fmt.Errorf("session %s: look up who writes it: %w", sid, err)
	}
	if h != nil {
		return fmt.Errorf("session %s is mounted read-write by pid %d on host %s since %s (its lease): unmount it there first, or give --force",
			sid, h.Pid, h.Host, h.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

// takeLeaseForForce takes session sid's lease from a process on another
// host that holds it (on a shared store), so that a forced forget may
// commit: that process's writes fail from then on, and the forget waits
// for its lease to run out (up to the lease's TTL) so that it reads
// nothing stale.
func takeLeaseForForce(a *App, sid mvcc.SessionID) (func() error, error) {
	_, release, err := storeopen.TakeOverLease(a.Store, sid, func(h *postgres.HeldError) {
		fmt.Fprintf(a.Err, "padfs: taking session %s's lease from pid %d on host %s (its writes fail from now on); waiting up to %s for it to run out\n",
			sid, h.Pid, h.Host, time.Until(h.Expires).Round(time.Second))
	})
	return release, err
}
