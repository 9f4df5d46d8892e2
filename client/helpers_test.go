package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/protocol"
)

// patience bounds every wait for an event that must happen; reaching it fails
// the test instead of hanging it.
const patience = 10 * time.Second

// startServerAt starts a real server on addr and shuts it down when the test
// ends (tests may stop it earlier with Stop).
func startServerAt(t testing.TB, addr string) *inproc.Server {
	t.Helper()
	return inproc.Start(t, eventloop.Config{ListenAddress: addr, IOTimeout: 5 * time.Second})
}

// startServer starts a real server on a free loopback port and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerAt(t, "127.0.0.1:0").Addr().String()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*patience)
	t.Cleanup(cancel)
	return ctx
}

// watchAcks installs an observer and returns the channel it reports to. The
// channel is large enough for any test; an overflow drops events rather than
// stall the session.
func watchAcks(c *Client) <-chan ackEvent {
	ch := make(chan ackEvent, 4096)
	c.observe = func(e ackEvent) {
		select {
		case ch <- e:
		default:
		}
	}
	return ch
}

// nextAck waits for the next acknowledgement; heartbeat selects heartbeat acks
// (true) or the ACQUIRE's reply (false). It fails at once when ctx (usually the
// lock's or the work's) ends first.
func nextAck(ctx context.Context, t *testing.T, acks <-chan ackEvent, heartbeat bool) ackEvent {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case e := <-acks:
			if e.Heartbeat == heartbeat {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("ended before an acknowledgement (heartbeat %v): %v", heartbeat, context.Cause(ctx))
		case <-timeout:
			t.Fatalf("no acknowledgement (heartbeat %v) within %v", heartbeat, patience)
		}
	}
}

// await fails the test if ch is not closed (or does not deliver) within patience.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s: nothing within %v", what, patience)
		panic("unreachable")
	}
}

// countingDialer counts dial attempts and dials for real.
type countingDialer struct{ n atomic.Int32 }

func (d *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n.Add(1)
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// fakeServer is a scripted server for what a real one never does (protocol
// violations, silence, odd segmentation). Each accepted connection has its
// ACQUIRE read and is then handed to script; the connection is closed when
// script returns. It returns the address and a count of accepted connections.
func fakeServer(t *testing.T, script func(conn net.Conn)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				if err := readAcquire(conn); err != nil {
					t.Errorf("fake server: reading ACQUIRE: %v", err)
					return
				}
				script(conn)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), &accepted
}

func readAcquire(conn net.Conn) error {
	var header [protocol.AcquireHeaderLen]byte
	if _, err := io.ReadFull(conn, header[:]); err != nil {
		return err
	}
	name := make([]byte, binary.BigEndian.Uint16(header[protocol.AcquireHeaderLen-2:]))
	_, err := io.ReadFull(conn, name)
	return err
}

// answerHeartbeats replies with reply to every heartbeat until the client
// releases or closes; fakeServer then closes, first after a RELEASE, as a
// real server does.
func answerHeartbeats(conn net.Conn, reply []byte) {
	var b [1]byte
	for {
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] == byte(protocol.TypeRelease) {
			return
		}
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

// drain reads until the client releases or closes.
func drain(conn net.Conn) {
	var b [1]byte
	for {
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] == byte(protocol.TypeRelease) {
			return
		}
	}
}

func acquired(token uint64) []byte { return protocol.AppendAcquired(nil, token) }
func waiting() []byte              { return protocol.AppendWaiting(nil) }
