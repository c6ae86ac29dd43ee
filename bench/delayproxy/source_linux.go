package main

import (
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// source is what a line reads from. read is io.Reader's Read that also
// says when the bytes arrived, on the nanotime clock.
type source interface {
	read(p []byte) (n int, arrived int64, err error)
}

// readerSource is any reader; bytes arrive when Read returns them.
type readerSource struct{ io.Reader }

func (s readerSource) read(p []byte) (int, int64, error) {
	n, err := s.Read(p)
	return n, nanotime(), err
}

// tcpSource reads a TCP connection with the kernel's receive timestamps
// (SO_TIMESTAMPNS): a chunk's delay then counts from when its last
// packet reached the socket, not from when the reader goroutine got to
// run, some tens of µs later on a busy or idle machine, twice a round
// trip (at 0.2 ms, a quarter of the delay).
type tcpSource struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool // recv, bound once: no closure per read

	// recv's arguments and results
	p       []byte
	oob     [64]byte
	n, oobn int
	err     error
}

func newTCPSource(c *net.TCPConn) (*tcpSource, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("setsockopt SO_TIMESTAMPNS: %w", serr)
	}
	s := &tcpSource{rc: rc}
	s.fn = s.recv
	return s, nil
}

// recv is one recvmsg; it reports false (wait, then call again) while
// there is nothing to read.
func (s *tcpSource) recv(fd uintptr) bool {
	s.n, s.oobn, _, _, s.err = unix.Recvmsg(int(fd), s.p, s.oob[:], 0)
	return s.err != unix.EAGAIN
}

func (s *tcpSource) read(p []byte) (int, int64, error) {
	s.p = p
	err := s.rc.Read(s.fn)
	s.p = nil
	now, arrived := time.Now(), nanotime()
	switch {
	case err != nil:
		return 0, arrived, err
	case s.err != nil:
		return 0, arrived, fmt.Errorf("recvmsg: %w", s.err)
	case s.n == 0 && len(p) > 0:
		return 0, arrived, io.EOF
	}
	if ts, ok := s.stamp(); ok {
		// The stamp is wall-clock time: its age, then, on the monotonic
		// clock. A stamp from the future or ages ago (the wall clock
		// stepped) is ignored.
		if age := now.Sub(ts); age > 0 && age < time.Second {
			arrived -= int64(age)
		}
	}
	return s.n, arrived, nil
}

// stamp returns the receive timestamp of the last recvmsg, if it had one.
func (s *tcpSource) stamp() (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(s.oob[:s.oobn])
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Sec, ts.Nsec), true
		}
	}
	return time.Time{}, false
}
