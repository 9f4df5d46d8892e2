// Package releaseloop is the release-loop subcommand of bench, S9's client.
package releaseloop

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/tcpstate"
	"github.com/monolock/monolock/protocol"
)

// The release-loop subcommand is S9's client: it runs
// in the client's network namespace (ip netns exec), where the kernel's
// socket table it reads at the end is that namespace's, and prints one JSON
// line, a Result.
//
// -mode loop: workers goroutines, each acquiring and closing its own lock
// with the Go client (client.Acquire, Lock.Close) for -dur, counting cycles
// per second, connect failures (EADDRNOTAVAIL among them) and, at the end,
// the TIME_WAIT entries of the namespace towards the server's port.
//
// -mode loss: for -trials rounds, a holder and a waiter of one lock; the
// holder releases, and the time from the return of its Close to the
// waiter's grant is how long the server kept the lock after the release.
// The scenario drops the namespace's outgoing FINs and RSTs meanwhile.
//
// -close says how the client releases: release (RELEASE, the client's own
// way), fin (the client's FIN first, as a client from before RELEASE does)
// or rst (an abortive close, the fallback's RST).

// Result is the child's one line of output, which S9 reads.
type Result struct {
	Cycles          uint64    `json:"cycles"`
	PerSecond       []uint64  `json:"per_second"` // cycles completed in each second
	ConnectFailures uint64    `json:"connect_failures"`
	AddrNotAvail    uint64    `json:"addr_not_avail"`
	OtherFailures   uint64    `json:"other_failures"`
	FirstFailure    string    `json:"first_failure,omitempty"`
	TimeWait        int       `json:"time_wait"`
	Seconds         float64   `json:"seconds"`
	HoldAfterMS     []float64 `json:"hold_after_release_ms,omitempty"` // loss mode, one per trial
}

// Main runs the subcommand with its arguments (after "release-loop") and
// returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release-loop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "the server's host:port")
	mode := fs.String("mode", "loop", "loop or loss")
	closeHow := fs.String("close", "release", "release, fin or rst")
	dur := fs.Duration("dur", 10*time.Second, "loop: how long")
	workers := fs.Int("workers", 16, "loop: concurrent lock cycles")
	lease := fs.Duration("lease", 2*time.Second, "every session's lease")
	trials := fs.Int("trials", 3, "loss: rounds")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var dialer client.Dialer // nil: the client's own, as its users get it
	switch *closeHow {
	case "release":
	case "fin", "rst":
		dialer = oldCloseDialer{abort: *closeHow == "rst"}
	default:
		_, _ = fmt.Fprintf(stderr, "release-loop: -close %q: want release, fin or rst\n", *closeHow)
		return 2
	}
	c := client.New(client.Config{Address: *addr, Dialer: dialer, ConnectTimeout: 5 * time.Second})
	_, port, _ := net.SplitHostPort(*addr)
	before := timeWaitTowards(port, nil) // the harness's own, from before the loop
	var res Result
	var err error
	switch *mode {
	case "loop":
		res = cycleLoop(c, *workers, *dur, *lease)
	case "loss":
		res.HoldAfterMS, err = holdAfterRelease(c, *addr, *trials, *lease)
	default:
		err = fmt.Errorf("-mode %q: want loop or loss", *mode)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "release-loop: %v\n", err)
		return 1
	}
	res.TimeWait = len(timeWaitTowards(port, before))
	line, _ := json.Marshal(res)
	_, _ = fmt.Fprintln(stdout, string(line))
	return 0
}

// oldCloseDialer's connections turn the client's RELEASE into a close of
// their own, first: with a FIN (a client from before RELEASE) or with an
// RST (the release's fallback), so that the same Go client loop measures the
// old release.
type oldCloseDialer struct{ abort bool }

func (d oldCloseDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{KeepAlive: -1}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &oldCloseConn{Conn: conn, abort: d.abort}, nil
}

type oldCloseConn struct {
	net.Conn
	abort bool
}

func (c *oldCloseConn) Write(b []byte) (int, error) {
	if len(b) == protocol.ReleaseLen && b[0] == byte(protocol.TypeRelease) {
		if tcp, ok := c.Conn.(*net.TCPConn); ok && c.abort {
			_ = tcp.SetLinger(0)
		}
		_ = c.Conn.Close()
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// cycleLoop runs lock cycles from workers goroutines for dur.
func cycleLoop(c *client.Client, workers int, dur, lease time.Duration) Result {
	var res Result
	start := time.Now()
	end := start.Add(dur)
	seconds := int((dur + time.Second - 1) / time.Second)
	perSecond := make([]atomic.Uint64, seconds)
	var cycles, connFail, addrNotAvail, other atomic.Uint64
	var firstMu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("release-loop-%d", w)
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				l, err := c.Acquire(ctx, name, lease)
				cancel()
				if err == nil {
					err = l.Close()
				}
				if err != nil {
					var dial *net.OpError
					switch {
					case errors.Is(err, syscall.EADDRNOTAVAIL):
						addrNotAvail.Add(1)
						connFail.Add(1)
					case errors.As(err, &dial) && dial.Op == "dial", errors.Is(err, client.ErrConnectTimeout):
						connFail.Add(1)
					default:
						other.Add(1)
					}
					firstMu.Lock()
					if res.FirstFailure == "" {
						res.FirstFailure = err.Error()
					}
					firstMu.Unlock()
					time.Sleep(time.Millisecond) // a failing connect returns at once: do not spin
					continue
				}
				cycles.Add(1)
				if s := int(time.Since(start) / time.Second); s < seconds {
					perSecond[s].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Cycles, res.ConnectFailures, res.AddrNotAvail, res.OtherFailures = cycles.Load(), connFail.Load(), addrNotAvail.Load(), other.Load()
	for i := range perSecond {
		res.PerSecond = append(res.PerSecond, perSecond[i].Load())
	}
	return res
}

// holdAfterRelease measures, trials times, how long the server keeps a lock
// after its holder's Close has returned: the waiter's grant minus that
// return (0 or less: granted before Close returned).
func holdAfterRelease(c *client.Client, addr string, trials int, lease time.Duration) ([]float64, error) {
	var out []float64
	for i := range trials {
		name := fmt.Sprintf("release-loss-%d-%d", time.Now().UnixNano(), i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+2*lease)
		h, err := c.Acquire(ctx, name, lease)
		if err != nil {
			cancel()
			return out, fmt.Errorf("trial %d: holder: %w", i, err)
		}
		// The waiter releases with RELEASE whatever -close says: only the
		// holder's release is measured.
		w, err := client.New(client.Config{Address: addr}).Enqueue(ctx, name, lease)
		if err != nil {
			cancel()
			_ = h.Close()
			return out, fmt.Errorf("trial %d: waiter: %w", i, err)
		}
		_ = h.Close()
		released := time.Now()
		select {
		case <-w.Granted():
			out = append(out, float64(time.Since(released).Microseconds())/1000)
		case <-ctx.Done():
			cancel()
			_ = w.Close()
			return out, fmt.Errorf("trial %d: the waiter was not granted within %v of the release", i, 10*time.Second+2*lease)
		}
		cancel()
		_ = w.Close()
	}
	sort.Float64s(out)
	return out, nil
}

// timeWaitTowards returns the TIME_WAIT entries of this process's network
// namespace whose remote port is port (the client side's, towards the
// server), by local port, leaving out those in except.
func timeWaitTowards(port string, except map[uint16]bool) map[uint16]bool {
	out := map[uint16]bool{}
	socks, err := tcpstate.Sockets()
	if err != nil {
		return out
	}
	for _, s := range socks {
		if s.State == tcpstate.TimeWait && fmt.Sprint(s.RemotePort) == port && !except[s.LocalPort] {
			out[s.LocalPort] = true
		}
	}
	return out
}
