package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
)

// finishJobs finishes the hard forgets and redactions a killed or
// interrupted padfs left marked (mvcc.Store.Jobs): the process that opens
// the store next carries them out, with progress on stderr, before the
// command it was started for. A job that fails again stays marked (its
// session stays invisible) and is reported; the command goes on.
func finishJobs(ctx context.Context, a *App) {
	jobs, err := a.Store.Jobs()
	if err != nil {
		fmt.Fprintf(a.Err, "padfs: warning: list interrupted purges and redactions: %v\n", oneLine(err.Error()))
		return
	}
	for _, j := range jobs {
		what := map[string]string{mvcc.JobPurge: "hard forget", mvcc.JobRedact: "redaction"}[j.Kind]
		fmt.Fprintf(a.Err, "padfs: finishing the %s of session %s cut short earlier (%d of %d keys done in %d batches)\n",
			what, j.Session, j.Done, j.Total, j.Batches)
		if err := finishJob(ctx, a, j.Session); err != nil {
			fmt.Fprintf(a.Err, "padfs: warning: the %s of session %s did not finish: %v\n", what, j.Session, oneLine(err.Error()))
			continue
		}
		if a.Finished == nil {
			a.Finished = map[mvcc.SessionID]string{}
		}
		a.Finished[j.Session] = j.Kind
	}
}

// finishJob finishes the job marked on sid, in the store and its index.
func finishJob(ctx context.Context, a *App, sid mvcc.SessionID) error {
	releaseReserve(a.Dir) // it writes before it frees, as a purge does
	defer restoreReserve(a.Dir)
	_, err := lifecycle(a, sid, func(st *session.Store, progress mvcc.Progress) (*any, error) {
		r, err := st.FinishJob(ctx, sid, progress)
		if r == nil {
			return nil, err
		}
		return &r, err
	})
	return err
}

// busyJob returns the job marked on sid, if err says the session is busy.
func busyJob(a *App, sid mvcc.SessionID, err error) (*mvcc.Job, bool) {
	if !errors.Is(err, mvcc.ErrBusy) {
		return nil, false
	}
	jobs, jerr := a.Store.Jobs()
	if jerr != nil {
		return nil, false
	}
	for _, j := range jobs {
		if j.Session == sid {
			return &j, true
		}
	}
	return nil, false
}

// finishedBefore reports whether the command's session argument arg names
// a session whose job finishJobs finished just before the command ran
// (the command then has nothing left to do).
func finishedBefore(a *App, arg, kind string) (mvcc.SessionID, bool) {
	id, err := mvcc.ParseSessionID(arg)
	if err != nil {
		return id, false
	}
	return id, a.Finished[id] == kind
}
