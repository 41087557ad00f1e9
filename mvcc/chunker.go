package mvcc

import (
	"io"
	"sync"

	fastcdc "github.com/jotfs/fastcdc-go"
)

// fastcdc-go's NewChunker XORs its package-level gear table with
// Options.Seed on every call (a no-op for seed 0, but still a write), while
// every running Chunker reads that table: concurrent commits were a data
// race. NewChunker takes the table exclusively, each Next shares it.
var chunkerTable sync.RWMutex

func newChunker(r io.Reader, opts fastcdc.Options) (*fastcdc.Chunker, error) {
	chunkerTable.Lock()
	defer chunkerTable.Unlock()
	return fastcdc.NewChunker(r, opts)
}

func nextChunk(c *fastcdc.Chunker) (fastcdc.Chunk, error) {
	chunkerTable.RLock()
	defer chunkerTable.RUnlock()
	return c.Next()
}
