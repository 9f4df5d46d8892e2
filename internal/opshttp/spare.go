package opshttp

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The HTTP ports share the process's descriptor limit with the lock port,
// which may be exhausted by clients that connect and send nothing. A probe
// must be answered then too, so each HTTP listener keeps one descriptor in
// reserve: a duplicate of its own listening socket, which costs nothing but
// the descriptor. When accept fails for want of descriptors, the listener
// closes the duplicate, accepts into the descriptor that frees, and takes a
// spare again as soon as one is free: at its next accept, or when one of its
// connections closes and hands its descriptor back.

// acceptRetry is how often a listener without a spare tries again at the
// descriptor limit. net/http's own back-off would reach a second, longer
// than a probe waits.
const acceptRetry = 5 * time.Millisecond

// spareDescriptor is a listener's reserve descriptor.
type spareDescriptor struct {
	mu     sync.Mutex
	source int // the listening socket's descriptor; -1 when there is none
	fd     int // the spare; -1 when none is held
}

// newSpare makes the spare of ln; without a descriptor to duplicate (not a
// socket listener) it holds none and does nothing.
func newSpare(ln net.Listener) *spareDescriptor {
	d := &spareDescriptor{source: -1, fd: -1}
	if sc, ok := ln.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { d.source = int(fd) })
		}
	}
	d.reserve()
	return d
}

// reserve takes a spare if none is held and a descriptor is free.
func (d *spareDescriptor) reserve() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.source < 0 || d.fd >= 0 {
		return
	}
	if fd, err := unix.FcntlInt(uintptr(d.source), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		d.fd = fd
	}
}

// release frees the spare for the caller's next accept; false when none was
// held.
func (d *spareDescriptor) release() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return false
	}
	_ = unix.Close(d.fd)
	d.fd = -1
	return true
}

// close drops the spare for good, before the listener closes: an open
// duplicate would keep the socket listening.
func (d *spareDescriptor) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
	}
	d.fd, d.source = -1, -1
}

// queued reports whether ln has a connection waiting to be accepted (its
// listening socket is readable); false when that cannot be told.
func queued(ln net.Listener) bool {
	n := 0
	return withFD(ln, func(fd int) (err error) {
		n, err = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err
	}) && n > 0
}

// withFD calls f with the descriptor of x, a socket; false when x has none
// or f failed.
func withFD(x any, f func(fd int) error) bool {
	sc, ok := x.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	if raw.Control(func(fd uintptr) { err = f(int(fd)) }) != nil {
		return false
	}
	return err == nil
}

// outOfDescriptors reports whether err is the process's or the system's
// descriptor limit.
func outOfDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// accept accepts the next connection; at the descriptor limit it uses the
// spare, and without one it asks the gate for a descriptor and tries again
// as soon as one is freed for it, or every acceptRetry, until it succeeds or
// the listener closes. Other errors are returned as they are.
func (l *limitListener) accept() (net.Conn, error) {
	var freed <-chan struct{} // nil without a gate: never ready
	if l.gate != nil {
		freed = l.gate.Freed()
	}
	var done func() // set while the gate knows this listener wants one
	defer func() {
		if done != nil {
			done()
		}
	}()
	for {
		l.spare.reserve()
		c, err := l.Listener.Accept()
		if err != nil && outOfDescriptors(err) && l.spare.release() {
			c, err = l.Listener.Accept()
		}
		if err == nil || !outOfDescriptors(err) {
			return c, err
		}
		// Want a descriptor only while a connection waits for one. At the
		// limit accept fails before it looks at the queue, so an idle
		// listener fails here too; if it held the gate it would be
		// yielded a descriptor it cannot use, its next accept would park
		// on an empty queue with the gate still held, and the lock port
		// would wait out every yield: newcomers there served at a few
		// dozen a second.
		switch pending := l.pending(); {
		case !pending && done != nil:
			done()
			done = nil
		case pending && done == nil && l.gate != nil:
			done = l.gate.Want()
		}
		select {
		case <-time.After(acceptRetry):
		case <-freed:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
}
