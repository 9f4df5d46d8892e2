// Package floor is the bare gnet server the harness measures monolock
// against (the floor): the hidden subcommand floor-server of the harness's
// binary runs it, and proc starts it like any server with a start line.
package floor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/startline"
)

// The bare gnet server: the floor that monolock's per-heartbeat CPU is
// measured against. Same gnet options as monolock (one event loop, no
// multicore) and nothing else: every byte received is answered with 9 bytes,
// shaped like an ACQUIRED frame (0x12 and a zero token) so the load generator
// parses both servers' replies with the same decoder.

// Started is the message of the floor server's start line, which follows
// monolock's readiness contract: its address under the key package
// startline names, which proc reads.
const Started = "floor-server started"

// Reply is the 9-byte answer to one received byte: an ACQUIRED frame's
// type and a zero token.
const Reply = "\x12\x00\x00\x00\x00\x00\x00\x00\x00"

type floorHandler struct {
	gnet.BuiltinEventEngine
	out    []byte
	stderr io.Writer
	quiet  bool // the start line is not OnBoot's to print (a client engine has no listener)
}

func (h *floorHandler) OnBoot(eng gnet.Engine) gnet.Action {
	if h.quiet {
		return gnet.None
	}
	addr := "?"
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			if in4, ok := sa.(*unix.SockaddrInet4); ok {
				addr = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
			}
		}
		_ = unix.Close(fd)
	}
	line, _ := json.Marshal(map[string]string{"level": "info", "message": Started, startline.Listen: addr})
	_, _ = fmt.Fprintf(h.stderr, "%s\n", line)
	return gnet.None
}

func (h *floorHandler) OnTraffic(c gnet.Conn) gnet.Action {
	n := c.InboundBuffered()
	if n == 0 {
		return gnet.None
	}
	_, _ = c.Discard(n)
	out := h.out[:0]
	for range n {
		out = append(out, Reply...)
	}
	h.out = out
	_, _ = c.Write(out)
	return gnet.None
}

// Main is the hidden subcommand `floor-server -listen ADDR`.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("floor-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on")
	goAccept := fs.Bool("go-accept", false, "accept with a Go listener and enroll each connection (the EMFILE-safe way monolock accepts), not with gnet's acceptor")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h := &floorHandler{stderr: stderr}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		os.Exit(0)
	}()
	if *goAccept {
		return floorGoAccept(h, *listen, stderr)
	}
	err := gnet.Run(h, "tcp://"+*listen,
		gnet.WithMulticore(false),
		gnet.WithNumEventLoop(1),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(floorLogger{stderr}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "floor-server: %v\n", err)
		return 1
	}
	return 0
}

// floorGoAccept is the floor of an EMFILE-safe server: a Go listener (no
// keep-alive, like monolock's) whose accept goroutine enrolls every
// connection into a one-loop gnet client engine. gnet's own acceptor stops
// its loop when accept(2) fails with EMFILE; this one would back off. Only
// that is left out: it is the least an EMFILE-safe gnet server pays per
// connection.
func floorGoAccept(h *floorHandler, listen string, stderr io.Writer) int {
	h.quiet = true
	ln, err := (&net.ListenConfig{KeepAlive: -1}).Listen(context.Background(), "tcp", listen)
	if err != nil {
		fmt.Fprintf(stderr, "floor-server: %v\n", err)
		return 1
	}
	cli, err := gnet.NewClient(h,
		gnet.WithMulticore(false),
		gnet.WithNumEventLoop(1),
		gnet.WithTCPNoDelay(gnet.TCPDelay), // Go's accept set TCP_NODELAY already
		gnet.WithLogger(floorLogger{stderr}),
	)
	if err == nil {
		err = cli.Start()
	}
	if err != nil {
		fmt.Fprintf(stderr, "floor-server: %v\n", err)
		return 1
	}
	line, _ := json.Marshal(map[string]string{"level": "info", "message": Started, startline.Listen: ln.Addr().String()})
	_, _ = fmt.Fprintf(h.stderr, "%s\n", line)
	for {
		c, err := ln.Accept()
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		_, _ = cli.EnrollContext(c, nil)
	}
}

// floorLogger drops gnet's chatter and keeps its warnings and errors.
type floorLogger struct{ w io.Writer }

func (floorLogger) Debugf(string, ...any) {}
func (floorLogger) Infof(string, ...any)  {}
func (l floorLogger) Warnf(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "floor-server: gnet: "+format+"\n", args...)
}
func (l floorLogger) Errorf(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "floor-server: gnet: "+format+"\n", args...)
}
func (l floorLogger) Fatalf(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "floor-server: gnet: "+format+"\n", args...)
}
