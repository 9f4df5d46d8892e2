package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// The bare gnet server: the floor that monolock's per-heartbeat CPU is
// measured against. Same gnet options as monolock (one event loop, no
// multicore) and nothing else: every byte received is answered with 9 bytes,
// shaped like an ACQUIRED frame (0x12 and a zero token) so the load generator
// parses both servers' replies with the same decoder.

// floorStarted is the message of the floor server's start line, which
// follows monolock's readiness contract (internal/testsupport/proc).
const floorStarted = "floor-server started"

// floorReply is the 9-byte answer to one received byte.
var floorReply = [9]byte{0x12}

type floorHandler struct {
	gnet.BuiltinEventEngine
	out    []byte
	stderr io.Writer
}

func (h *floorHandler) OnBoot(eng gnet.Engine) gnet.Action {
	addr := "?"
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			if in4, ok := sa.(*unix.SockaddrInet4); ok {
				addr = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
			}
		}
		_ = unix.Close(fd)
	}
	line, _ := json.Marshal(map[string]string{"level": "info", "message": floorStarted, "listen": addr})
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
		out = append(out, floorReply[:]...)
	}
	h.out = out
	_, _ = c.Write(out)
	return gnet.None
}

// floorServerMain is the hidden subcommand `floor-server -listen ADDR`.
func floorServerMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("floor-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on")
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
