// Command loopbacknopt is go-fuse's example/loopback (the same options and
// flags the end-to-end benchmark passes: MOUNTPOINT ORIGINAL, -q,
// -directmount) with FUSE passthrough left out. The example hands every
// open file's descriptor to the kernel (FOPEN_PASSTHROUGH, Linux 6.9 and
// later), so its reads and writes are ext4's and its page cache is
// ext4's; this one serves them as a FUSE server without passthrough does
// (padfs's default), which is the row to read beside it.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// file is a loopback file handle without its PassthroughFd.
type file struct{ h fs.FileHandle }

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.h.(fs.FileReader).Read(ctx, dest, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return f.h.(fs.FileWriter).Write(ctx, data, off)
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.h.(fs.FileFlusher).Flush(ctx) }

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.h.(fs.FileFsyncer).Fsync(ctx, flags)
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.h.(fs.FileReleaser).Release(ctx) }

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.h.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.h.(fs.FileSetattrer).Setattr(ctx, in, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.h.(fs.FileLseeker).Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.h.(fs.FileAllocater).Allocate(ctx, off, size, mode)
}

// node is a loopback node whose files are opened without passthrough; its
// children are such nodes too.
type node struct{ *fs.LoopbackNode }

func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{ops.(*fs.LoopbackNode)}
}

func wrap(h fs.FileHandle) fs.FileHandle {
	if h == nil {
		return nil
	}
	return &file{h}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return wrap(h), fl, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, h, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, wrap(h), fl, errno
}

func main() {
	flag.Bool("q", false, "quiet (always)")
	direct := flag.Bool("directmount", false, "call mount(2) instead of fusermount3")
	flag.Parse()
	if flag.NArg() != 2 {
		log.Fatal("usage: loopbacknopt [-q] [-directmount] MOUNTPOINT ORIGINAL")
	}
	lb, err := fs.NewLoopbackRoot(flag.Arg(1))
	if err != nil {
		log.Fatal(err)
	}
	root := &node{lb.(*fs.LoopbackNode)}
	sec := time.Second
	srv, err := fs.Mount(flag.Arg(0), root, &fs.Options{
		AttrTimeout:     &sec,
		EntryTimeout:    &sec,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMount: *direct,
			FsName:      flag.Arg(1),
			Name:        "loopbacknopt",
		},
	})
	if err != nil {
		log.Fatalf("mount %s: %v", flag.Arg(0), err)
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-c
		srv.Unmount()
	}()
	srv.Wait()
}
