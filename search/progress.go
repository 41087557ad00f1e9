package search

import (
	"sync"
	"time"
)

// buildProgress reports a build's progress as documents indexed: those the
// backend has committed to bleve (its Indexed count since the build
// began), not those handed to it. Documents handed over run ahead of the
// work by the batches in flight and, with a worker, by the socket's
// buffer: counting them made the bar jump to a fifth and then stand still
// while the batches were analysed. It polls the count every few documents
// sent and, while the build waits (a full batch slot, the final batches),
// a few times a second.
type buildProgress struct {
	be    backend
	fn    Progress
	total int64
	base  uint64
	every int // documents sent between polls

	mu   sync.Mutex
	last int64
	sent int

	quit chan struct{}
	done chan struct{}
}

// progressPoll is how often a waiting build looks at the count.
const progressPoll = 200 * time.Millisecond

func startProgress(be backend, fn Progress, total int) *buildProgress {
	if fn == nil {
		return nil
	}
	p := &buildProgress{be: be, fn: fn, total: int64(total), base: be.stats().Indexed,
		every: max(1, total/200), quit: make(chan struct{}), done: make(chan struct{})}
	fn(0, p.total)
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressPoll)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.poll()
			}
		}
	}()
	return p
}

// sentOne notes a document handed to the backend.
func (p *buildProgress) sentOne() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.sent++
	poll := p.sent%p.every == 0
	p.mu.Unlock()
	if poll {
		p.poll()
	}
}

// poll reports the committed count if it advanced (never backwards, never
// the total: that is for end, after the last batch).
func (p *buildProgress) poll() {
	n := int64(p.be.stats().Indexed - p.base)
	p.mu.Lock()
	defer p.mu.Unlock()
	n = min(n, p.total-1)
	if n > p.last {
		p.last = n
		p.fn(n, p.total)
	}
}

// end stops the polling; after a successful build it reports the total.
func (p *buildProgress) end(err error) {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.total > p.last {
		p.last = p.total
		p.fn(p.total, p.total)
	}
}
