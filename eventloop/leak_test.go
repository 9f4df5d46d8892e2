package eventloop_test

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// Many sessions ending every way a session can end, concurrently and on a
// few shared locks, leave nothing behind: no session, lock, waiter or timer.
func TestNoLeaks(t *testing.T) {
	ts := startServer(t, ioTimeout)
	const workers, cycles, locks = 8, 60, 3
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range cycles {
				if err := leakCycle(ts, w, i, fmt.Sprintf("leak-%d", (w+i)%locks)); err != nil {
					errs <- fmt.Errorf("worker %d cycle %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ts.waitStats(t, admin.Stats{})
}

// leakCycle runs one session to one of its possible ends.
func leakCycle(ts *testServer, w, i int, lock string) error {
	c, err := dialErr(ts, fmt.Sprintf("worker %d cycle %d", w, i))
	if err != nil {
		return err
	}
	defer func() { _ = c.NC.Close() }()
	switch i % 7 {
	case 0: // acquire, heartbeat, close (holder or waiter)
		if err := c.SendErr(append(wire.Acquire(lock, longLease), 0x02)); err != nil {
			return err
		}
		return readN(c, 2)
	case 1: // protocol error after a valid ACQUIRE: the lock passes on
		if err := c.SendErr(append(wire.Acquire(lock, longLease), 0x7f)); err != nil {
			return err
		}
		return untilError(c, protocol.CodeUnknownMessageType)
	case 2: // protocol error before any ACQUIRE
		if err := c.SendErr(wire.Heartbeat); err != nil {
			return err
		}
		return untilError(c, protocol.CodeFirstMessageNotAcquire)
	case 3: // a short lease that expires, holding or waiting
		if err := c.SendErr(wire.Acquire(lock, 20)); err != nil {
			return err
		}
		return untilError(c, 0)
	case 4: // connect and leave at once
		return nil
	case 5: // leave in the middle of a frame
		return c.SendErr(wire.Acquire(lock, longLease)[:7])
	default: // say nothing until io-timeout closes it
		return untilError(c, 0)
	}
}

// readN reads n frames, each WAITING or ACQUIRED.
func readN(c *wire.Conn, n int) error {
	for range n {
		f, err := c.ReadErr(safety)
		if err != nil {
			return err
		}
		if f.Type == protocol.TypeError {
			return fmt.Errorf("unexpected %v", f)
		}
	}
	return nil
}

// untilError reads WAITING and ACQUIRED frames (a waiter may be promoted any
// time) until an ERROR with the code, then EOF. Code 0 means no ERROR: the
// server closes the connection silently (lease expiry, io-timeout).
func untilError(c *wire.Conn, code protocol.Code) error {
	for {
		f, err := c.ReadErr(safety)
		switch {
		case errors.Is(err, io.EOF) && code == 0:
			return nil
		case err != nil:
			return err
		case f.Type == protocol.TypeError && f.Code == code:
			return c.EOFErr()
		case f.Type == protocol.TypeError:
			return fmt.Errorf("got %v, want ERROR 0x%02x", f, uint8(code))
		}
	}
}
