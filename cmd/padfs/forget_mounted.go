package main

import (
	"context"
	"fmt"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
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
