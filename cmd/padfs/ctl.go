package main

// The control socket: how the CLI reaches a running mount.
//
// bbolt locks the store file for one process, so while `padfs mount` runs,
// the other commands on the same data directory cannot open the store.
// Instead, withApp connects to DATA/padfs.sock and the mount's process runs
// the same command line in-process, on a fresh command tree, against its
// open store, streaming the output back.
//
// Protocol (version 1), over a unix stream socket, in frames:
//
//	frame   = type[1] length[4, big-endian] payload[length]   (length <= 1 MiB)
//
//	client -> server
//	  'Q'  the request, once, first: JSON {"v":1, "op":"run"|"info"|"mount", "argv":[...], "cwd":"/abs"}
//	       (op "mount", with "mount":{...}: serve one more mount; multimount.go)
//	       argv and cwd are bytes: when an argument or the cwd is not valid
//	       UTF-8, "argv_b64" (every argument in base64) and "cwd_b64" carry
//	       them exactly (internal/jsonbytes); an older peer ignores them
//	  'I'  stdin bytes answering an 'R' frame; an empty payload means end of input
//	server -> client
//	  'O'  bytes for the client's stdout
//	  'E'  bytes for the client's stderr
//	  'R'  the command reads stdin: payload = the most bytes it wants, uint32
//	  'J'  the answer to op "info": JSON MountInfo (+ mountpoint_b64, data_b64)
//	  'X'  exit code, uint32; the last frame of every request
//
// One request per connection. Stdin is pulled, never pushed: the client
// reads its stdin only when the command reads, so `padfs now` inside a
// `while read` loop does not swallow the loop's input. The server learns the
// caller's uid/gid from SO_PEERCRED and accepts only its own uid and root
// (the socket is also mode 0600 inside the 0700 data directory). If the
// client goes away, the command's context is cancelled.
//
// A stale socket left by a kill -9 of padfs does not block the next mount:
// the next mount finds nobody answering (connection refused) and replaces it.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/padfs/padfs/internal/jsonbytes"
	"golang.org/x/sys/unix"
)

const (
	socketName    = "padfs.sock"
	ctlVersion    = 1
	maxFrame      = 1 << 20
	frameRequest  = 'Q'
	frameStdin    = 'I'
	frameStdout   = 'O'
	frameStderr   = 'E'
	frameReadReq  = 'R'
	frameInfo     = 'J'
	frameExitCode = 'X'
)

// socketPath is the control socket of data directory dir.
func socketPath(dir string) string { return filepath.Join(dir, socketName) }

type ctlRequest struct {
	V       int      `json:"v"`
	Op      string   `json:"op"`
	Argv    []string `json:"argv,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	ArgvB64 []string `json:"argv_b64,omitempty"`
	CwdB64  string   `json:"cwd_b64,omitempty"`
	// Mount is the request of op "mount" (multimount.go).
	Mount *mountRequest `json:"mount,omitempty"`
}

// mountInfoJSON is the 'J' payload: paths are bytes (internal/jsonbytes).
type mountInfoJSON struct {
	*MountInfo
	MountpointB64 string `json:"mountpoint_b64,omitempty"`
	DataB64       string `json:"data_b64,omitempty"`
}

func encodeMountInfo(m *MountInfo) mountInfoJSON {
	if m == nil {
		return mountInfoJSON{}
	}
	return mountInfoJSON{MountInfo: m, MountpointB64: jsonbytes.B64(m.Mountpoint), DataB64: jsonbytes.B64(m.Data)}
}

func decodeMountInfo(p []byte) (MountInfo, error) {
	j := mountInfoJSON{MountInfo: &MountInfo{}}
	if err := json.Unmarshal(p, &j); err != nil {
		return MountInfo{}, err
	}
	info := *j.MountInfo
	var err error
	if info.Mountpoint, err = jsonbytes.Decode(info.Mountpoint, j.MountpointB64); err != nil {
		return MountInfo{}, fmt.Errorf("control socket: mountpoint_b64: %w", err)
	}
	if info.Data, err = jsonbytes.Decode(info.Data, j.DataB64); err != nil {
		return MountInfo{}, fmt.Errorf("control socket: data_b64: %w", err)
	}
	return info, nil
}

// encodeRequest is the 'Q' payload running argv in cwd.
func encodeRequest(op string, argv []string, cwd string) []byte {
	b, _ := json.Marshal(ctlRequest{V: ctlVersion, Op: op, Argv: argv, Cwd: cwd,
		ArgvB64: jsonbytes.B64s(argv), CwdB64: jsonbytes.B64(cwd)}) // strings only: cannot fail
	return b
}

// decodeRequest parses a 'Q' payload, restoring the exact bytes of argv
// and cwd.
func decodeRequest(p []byte) (ctlRequest, error) {
	var req ctlRequest
	if err := json.Unmarshal(p, &req); err != nil {
		return ctlRequest{}, fmt.Errorf("control socket: bad request: %w", err)
	}
	var err error
	if req.Argv, err = jsonbytes.DecodeStrings(req.Argv, req.ArgvB64); err != nil {
		return ctlRequest{}, fmt.Errorf("control socket: bad request: argv_b64: %w", err)
	}
	if req.Cwd, err = jsonbytes.Decode(req.Cwd, req.CwdB64); err != nil {
		return ctlRequest{}, fmt.Errorf("control socket: bad request: cwd_b64: %w", err)
	}
	req.ArgvB64, req.CwdB64 = nil, ""
	return req, nil
}

func writeFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("control socket: frame of %d bytes exceeds %d", len(payload), maxFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("control socket: frame of %d bytes exceeds %d", n, maxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return hdr[0], p, nil
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// frameConn serializes frame writes from a command's concurrent writers.
type frameConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (f *frameConn) send(typ byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return writeFrame(f.c, typ, p)
}

// stream is an io.Writer that sends its bytes as frames of one type.
type stream struct {
	fc  *frameConn
	typ byte
}

func (s stream) Write(p []byte) (int, error) {
	for done := 0; done < len(p); {
		n := min(len(p)-done, maxFrame)
		if err := s.fc.send(s.typ, p[done:done+n]); err != nil {
			return done, err
		}
		done += n
	}
	return len(p), nil
}

// remoteStdin reads the client's stdin on demand.
type remoteStdin struct {
	mu  sync.Mutex
	fc  *frameConn
	ch  chan []byte // closed when the client goes away
	ctx context.Context
	eof bool
}

func (r *remoteStdin) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := min(len(p), 64<<10)
	if err := r.fc.send(frameReadReq, u32(uint32(n))); err != nil {
		return 0, err
	}
	select {
	case b, ok := <-r.ch:
		if !ok || len(b) == 0 {
			r.eof = true
			return 0, io.EOF
		}
		return copy(p, b), nil
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	}
}

// ctlServer serves a data directory's control socket inside the mount.
type ctlServer struct {
	path   string
	ln     *net.UnixListener
	base   App       // Dir, Store, Changed, Mount
	mounts *mountSet // the mounts this process serves (op "mount"); nil: none
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ino    uint64 // of the socket file we created (removed on Close only if still ours)
}

// listenCtl creates DATA/padfs.sock (mode 0600). A socket file nobody
// answers on is stale (its padfs was killed) and is replaced; one that
// answers means another padfs serves this data directory.
func listenCtl(base App, log *slog.Logger) (*ctlServer, error) {
	return listenCtlMounts(base, nil, log)
}

// listenCtlMounts is listenCtl for a process that serves the mounts of set:
// op "mount" adds one, and a command runs with the Mount it was called in.
func listenCtlMounts(base App, set *mountSet, log *slog.Logger) (*ctlServer, error) {
	path := socketPath(base.Dir)
	if _, err := os.Lstat(path); err == nil {
		if info, err := queryMount(base.Dir); err == nil {
			return nil, fmt.Errorf("another padfs (pid %d, mounted at %s) serves the control socket %s", info.Pid, info.Mountpoint, path)
		}
		log.Info("removing stale control socket", "path", path)
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale control socket: %w", err)
		}
	}
	// Bind under a private name, restrict it, then rename it into place, so
	// the socket is never reachable with a looser mode.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &ctlServer{path: path, ln: ln, base: base, mounts: set, log: log}
	if fi, err := os.Lstat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			s.ino = st.Ino
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *ctlServer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("control socket accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if err := s.serve(c); err != nil {
				s.log.Debug("control socket request", "err", err)
			}
		}()
	}
}

// Close stops accepting, cancels running commands, waits for them and
// removes the socket file (if it is still the one this server created).
func (s *ctlServer) Close() {
	s.ln.Close()
	s.cancel()
	s.wg.Wait()
	if fi, err := os.Lstat(s.path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == s.ino {
			os.Remove(s.path)
		}
	}
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

func (s *ctlServer) serve(c *net.UnixConn) error {
	fc := &frameConn{c: c}
	cred, err := peerCred(c)
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if cred.Uid != uint32(os.Getuid()) && cred.Uid != 0 {
		fmt.Fprintf(stream{fc, frameStderr}, "padfs: uid %d may not use the control socket of a mount owned by uid %d\n", cred.Uid, os.Getuid())
		return fc.send(frameExitCode, u32(2))
	}
	typ, p, err := readFrame(c)
	if err != nil {
		return err
	}
	if typ != frameRequest {
		return fmt.Errorf("control socket: first frame is %q, want %q", typ, frameRequest)
	}
	req, err := decodeRequest(p)
	if err != nil {
		return err
	}
	if req.V != ctlVersion {
		fmt.Fprintf(stream{fc, frameStderr}, "padfs: control socket protocol version %d, this mount speaks %d (restart the mount with the same padfs binary)\n", req.V, ctlVersion)
		return fc.send(frameExitCode, u32(2))
	}
	switch req.Op {
	case "info":
		b, _ := json.Marshal(encodeMountInfo(s.base.Mount))
		if err := fc.send(frameInfo, b); err != nil {
			return err
		}
		return fc.send(frameExitCode, u32(0))
	case "mount":
		return s.serveMount(c, fc, req, cred)
	case "run":
	default:
		fmt.Fprintf(stream{fc, frameStderr}, "padfs: control socket: unknown op %q\n", req.Op)
		return fc.send(frameExitCode, u32(2))
	}

	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	in := &remoteStdin{fc: fc, ch: make(chan []byte, 1), ctx: ctx}
	go func() { // client -> server: stdin answers; EOF means the client left
		defer close(in.ch)
		defer cancel()
		for {
			typ, p, err := readFrame(c)
			if err != nil {
				return
			}
			if typ == frameStdin {
				select {
				case in.ch <- p:
				default: // unsolicited: drop
				}
			}
		}
	}()
	app := s.base
	app.Cwd, app.Uid, app.Gid = req.Cwd, cred.Uid, cred.Gid
	if s.mounts != nil {
		app.Mount = s.mounts.infoFor(req.Cwd, s.base.Mount)
		app.Mounts = s.mounts.infos
	}
	ctx = context.WithValue(ctx, servedKey, &served{app: app})
	s.log.Debug("control socket: run", "argv", req.Argv, "cwd", req.Cwd, "uid", cred.Uid)
	code := execute(ctx, req.Argv, in, stream{fc, frameStdout}, stream{fc, frameStderr})
	return fc.send(frameExitCode, u32(uint32(code)))
}

// dialCtl connects to the control socket of dir, or fails fast.
func dialCtl(dir string) (*net.UnixConn, error) {
	c, err := net.DialTimeout("unix", socketPath(dir), 2*time.Second)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// forward runs argv in the mount serving dir, if there is one (ok false:
// nobody answers, open the store yourself). It relays the output and
// returns the remote exit code.
func forward(ctx context.Context, dir string, argv []string, cwd string, in io.Reader, out, errw io.Writer) (code int, ok bool, err error) {
	c, err := dialCtl(dir)
	if err != nil {
		return 0, false, nil
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	fc := &frameConn{c: c}
	if err := fc.send(frameRequest, encodeRequest("run", argv, cwd)); err != nil {
		return 0, false, nil // the socket accepted and died: treat as absent
	}
	wants := make(chan int, 1)
	defer close(wants)
	go func() { // stdin on demand, one read per 'R'
		buf := make([]byte, 64<<10)
		eof := false
		for n := range wants {
			if eof {
				fc.send(frameStdin, nil)
				continue
			}
			m, err := in.Read(buf[:min(n, len(buf))])
			if m > 0 {
				fc.send(frameStdin, buf[:m])
				continue
			}
			if err != nil {
				eof = true
			}
			fc.send(frameStdin, nil)
		}
	}()
	for {
		typ, p, err := readFrame(c)
		if err != nil {
			return 2, true, fmt.Errorf("lost the connection to the mount serving %s before the command finished: %v", dir, err)
		}
		switch typ {
		case frameStdout:
			out.Write(p)
		case frameStderr:
			errw.Write(p)
		case frameReadReq:
			if len(p) == 4 {
				select {
				case wants <- int(binary.BigEndian.Uint32(p)):
				default:
				}
			}
		case frameExitCode:
			if len(p) != 4 {
				return 2, true, fmt.Errorf("control socket: malformed exit frame")
			}
			return int(binary.BigEndian.Uint32(p)), true, nil
		}
	}
}

// queryMount asks the mount serving dir who it is.
func queryMount(dir string) (*MountInfo, error) {
	c, err := dialCtl(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeFrame(c, frameRequest, encodeRequest("info", nil, "")); err != nil {
		return nil, err
	}
	var info MountInfo
	for {
		typ, p, err := readFrame(c)
		if err != nil {
			return nil, err
		}
		switch typ {
		case frameInfo:
			if info, err = decodeMountInfo(p); err != nil {
				return nil, err
			}
		case frameExitCode:
			return &info, nil
		}
	}
}
