package main

import (
	"fmt"
	"log/slog"
	"sync"

	"context"
	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search"
)

// The search index of a data directory (DATA/index/). A running mount opens
// it once, keeps it following the store in the background, serves the
// .grep/ directory from it and lends it to forwarded commands; a command
// that opened the store itself opens the index for its own duration.

func init() { addMountHook(indexMountHook) }

var mountIndexes = struct {
	sync.Mutex
	m map[*mvcc.Store]*search.Index
}{m: map[*mvcc.Store]*search.Index{}}

// Index returns the search index of a's store and a function to call when
// done with it.
func (a *App) Index() (*search.Index, func(), error) {
	mountIndexes.Lock()
	ix := mountIndexes.m[a.Store]
	mountIndexes.Unlock()
	if ix != nil {
		return ix, func() {}, nil
	}
	ix, err := search.OpenWith(a.Dir, a.Store, search.Options{})
	if err != nil {
		return nil, nil, err
	}
	return ix, func() { ix.Close() }, nil
}

// indexMountHook opens the index in a mount's process and serves .grep/.
func indexMountHook(a *App, o *fs.Options) (func(), error) {
	log := a.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(a.Err, nil))
	}
	ix, err := search.OpenWith(a.Dir, a.Store, search.Options{Background: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	mountIndexes.Lock()
	mountIndexes.m[a.Store] = ix
	mountIndexes.Unlock()
	if o.Virtual == nil {
		o.Virtual = map[string]fs.VirtualDir{}
	}
	// .grep/PATTERN reads as `padfs grep -rn PATTERN` at the session root,
	// .grep/-i -C2 -- PATTERN as `padfs grep -rn -i -C2 -- PATTERN` (see
	// grep.ParseFileName). A file name cannot hold "/": write it as
	// %2F.
	o.Virtual[".grep"] = fs.VirtualDir{
		Open: func(ctx context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
			out, err := ix.GrepOutput(ctx, sid, name)
			if err != nil {
				return nil, fmt.Errorf(".grep/%s: %w", name, err)
			}
			return out, nil
		},
	}
	return func() {
		mountIndexes.Lock()
		delete(mountIndexes.m, a.Store)
		mountIndexes.Unlock()
		ix.Close()
	}, nil
}
