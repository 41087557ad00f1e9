package fs

import (
	"slices"
	"sync"
)

// Pages the kernel holds but does not trust. Without the writeback cache
// the kernel marks a page of its cache up to date only when one write(2)
// copied the whole page into it: a page filled by two writes (tar's 10 KiB
// records cut every third page in two, as does any write not aligned to
// 4 KiB) or the last page of a file (a partial one) stays "not up to
// date", so the next read of it is a FUSE READ, though the kernel holds
// the bytes. After an untar, reading the tree back (grep -r, git add, cat)
// cost one READ per 4.8 KB read.
//
// So a node keeps a copy of such pages as the writes fill them (pageFill),
// and the last release of the inode hands the complete ones to the kernel
// (FUSE_NOTIFY_STORE), which marks a page up to date when the store covers
// it whole or up to the end of the file. That is safe only while nobody
// can write the inode: the store's bytes would overwrite a write copied
// into the page meanwhile. The last release has no descriptor left that
// could write (a shared mapping holds its descriptor), and it holds the
// buffer's lock, which every new open takes before its reply, so no write
// can start before the store is done. Anything else that changes the
// content (truncate, O_TRUNC, fallocate, InvalidateSession) drops the
// copies; a change through another mount makes the next open drop the
// kernel's pages anyway (keepCache).

const (
	fillPageSize = 4096
	// maxFillPages bounds the pages one inode keeps copies of.
	maxFillPages = 64
	// maxFillBytes bounds the copies of all inodes of a mount.
	maxFillBytes = 32 << 20
)

// pageFill holds copies of the pages of an inode written in pieces since
// its last release.
type pageFill struct {
	mu    sync.Mutex
	pages map[int64]*fillPage // by page index
}

// fillPage is a copy of a page whose first known bytes were written.
type fillPage struct {
	buf   []byte // fillPageSize
	known int
}

// wrote records a successful write of data at off.
func (p *pageFill) wrote(m *Server, data []byte, off int64) {
	if len(data) == 0 || off < 0 {
		return
	}
	end := off + int64(len(data))
	first, last := off/fillPageSize, (end-1)/fillPageSize
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pages) == 0 && off%fillPageSize == 0 && end%fillPageSize == 0 {
		return // whole pages only: the kernel trusts them
	}
	for pg := range p.pages {
		if pg > first && pg < last {
			p.dropLocked(m, pg) // written whole
		}
	}
	p.page(m, first, data, off, end)
	if last != first {
		p.page(m, last, data, off, end)
	}
}

// page records what the write of data at [off, end) put in page pg.
func (p *pageFill) page(m *Server, pg int64, data []byte, off, end int64) {
	ps := pg * fillPageSize
	lo, hi := max(off, ps)-ps, min(end, ps+fillPageSize)-ps
	fp := p.pages[pg]
	switch {
	case lo == 0 && hi == fillPageSize:
		if fp != nil {
			p.dropLocked(m, pg) // written whole
		}
		return
	case fp == nil:
		// Only a page known from its start can be handed over.
		if lo != 0 || len(p.pages) >= maxFillPages {
			return
		}
		if m.fillBytes.Add(fillPageSize) > maxFillBytes {
			m.fillBytes.Add(-fillPageSize)
			return
		}
		fp = &fillPage{buf: make([]byte, fillPageSize)}
		if p.pages == nil {
			p.pages = map[int64]*fillPage{}
		}
		p.pages[pg] = fp
	case int(lo) > fp.known:
		p.dropLocked(m, pg) // a gap of bytes we did not see
		return
	}
	copy(fp.buf[lo:hi], data[ps+lo-off:ps+hi-off])
	fp.known = max(fp.known, int(hi))
}

func (p *pageFill) dropLocked(m *Server, pg int64) {
	delete(p.pages, pg)
	m.fillBytes.Add(-fillPageSize)
}

// take removes and returns the copies.
func (p *pageFill) take(m *Server) map[int64]*fillPage {
	p.mu.Lock()
	defer p.mu.Unlock()
	pages := p.pages
	p.pages = nil
	m.fillBytes.Add(-int64(len(pages)) * fillPageSize)
	return pages
}

// clear drops the copies: the content changed other than by a write.
func (p *pageFill) clear(m *Server) { p.take(m) }

// storeFilled hands the kernel the pages of n that writes filled in pieces
// (see pageFill) at a release of f, when it is the inode's last handle.
func (n *Node) storeFilled(f *fileState) {
	n.fill.mu.Lock()
	none := len(n.fill.pages) == 0
	n.fill.mu.Unlock()
	if none {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n.m.filesMu.Lock()
	last := f.opens == 1
	n.m.filesMu.Unlock()
	if !last {
		return // kept for the last release
	}
	pages := n.fill.take(n.m)
	if f.stage != nil || f.node != n {
		return
	}
	size := f.size
	idx := make([]int64, 0, len(pages))
	for pg, fp := range pages {
		// Complete, or up to the end of the file (where the kernel
		// zeroes the rest).
		if e := pg*fillPageSize + int64(fp.known); e <= size && (fp.known == fillPageSize || e == size) {
			idx = append(idx, pg)
		}
	}
	slices.Sort(idx)
	// One store per run of adjacent pages.
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[j-1]+1 && pages[idx[j-1]].known == fillPageSize {
			j++
		}
		buf := pages[idx[i]].buf[:pages[idx[i]].known]
		if j > i+1 {
			buf = make([]byte, 0, (j-i)*fillPageSize)
			for _, pg := range idx[i:j] {
				buf = append(buf, pages[pg].buf[:pages[pg].known]...)
			}
		}
		// ENOENT (the kernel forgot the inode) and the like: it
		// reads the pages as before.
		n.WriteCache(idx[i]*fillPageSize, buf)
		i = j
	}
}
