// Command brokendriver is a deliberately wrong client with a driver's
// interface, so that a test can show the conformance kit failing a client
// and naming the rule it broke: every mutant of the kit's mutation table
// (docs/conformance.md) is one -fault. It speaks the wire protocol itself
// and, without a fault, follows the client rules closely enough for the
// scenarios the mutants are judged by: the heartbeat schedule of rule 3
// (send to send, lease/4 shortened by twice the smoothed RTT, one request in
// flight), the give-up 0.8 × lease after the send of the newest answered
// request, a loss on an unexpected frame, and in run mode a reconnect after
// a random wait in [0, min(1 s, lease/4)] after ERROR 0x01, and the release:
// RELEASE, then the server's close awaited up to min(lease, 2 s), then a
// reset. Each fault breaks one rule:
//
//	slow-heartbeat        heartbeats every lease/2 instead of lease/4
//	no-smoothing          uses the last RTT instead of its EWMA (α = 1, not 0.2)
//	interval-after-reply  waits the interval after the answer, not after the send
//	never-give-up         keeps the lock however long answers take
//	give-up-0.9           gives up at 0.9 × lease instead of 0.8 ×
//	give-up-0.95          gives up at 0.95 × lease
//	give-up-from-receipt  times the give-up from the receipt of the newest
//	                      answer instead of its request's send
//	close-at-give-up      gives up on time but closes the connection at once,
//	                      while the work still runs
//	no-jitter             reconnects at once after ERROR 0x01, no random wait
//	waiting-after-grant   takes a WAITING after ACQUIRED as an answer
//	changed-token         takes a later ACQUIRED with another token as an answer
//	fin-release           releases by closing the connection, without RELEASE
//	error-after-release   reports the ERROR 0x13 an old server answers RELEASE with
//	release-fin-at-bound  closes with a FIN, not a reset, when the server has not
//	                      closed within the release bound
//	lease-overflow        times the lease in 32-bit signed milliseconds
//	late-push-violation   takes an ACQUIRED that follows a late answer in the same
//	                      read for a second answer: a protocol violation
//	late-error-no-code    reports an ERROR that follows a late answer in the same
//	                      read as a protocol violation, without its code
//	late-0x01-no-retry    reports an ERROR 0x01 that follows a late answer in the
//	                      same read instead of reconnecting
//	error-before-deadline takes a frame read after the give-up deadline before
//	                      the deadline (its timer waits for pending reads): an
//	                      ERROR then is reported with its code, not as silence
//	none                  breaks nothing of the above: the control
//
// It stamps the give-up's lost event with mono_ns, the CLOCK_MONOTONIC
// reading at its decision, so the kit judges the give-up mutants by when
// they decided. -print-late=D prints that event D after the decision, as a
// starved runtime would: the client is still right, and the kit must judge
// it by the stamp.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/protocol"
)

type request struct {
	Address    string `json:"address"`
	NameHex    string `json:"name_hex"`
	LeaseUS    int64  `json:"lease_us"`
	Mode       string `json:"mode"`
	WorkStopMS int64  `json:"work_stop_ms"`
}

// out prints events, one line each, from any goroutine.
type out struct{ mu sync.Mutex }

func (o *out) print(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

func main() {
	fault := flag.String("fault", "slow-heartbeat", "the rule to break (see the command's doc)")
	printLate := flag.Duration("print-late", 0, "how long after its decision the give-up's lost event is printed")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		os.Exit(2)
	}
	var req request
	if err := json.Unmarshal(in.Bytes(), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	name, _ := hex.DecodeString(req.NameHex)
	c := &client{fault: *fault, printLate: *printLate, req: req, name: string(name), lease: time.Duration(req.LeaseUS) * time.Microsecond, o: &out{}}
	if c.fault == "lease-overflow" {
		leaseMS, _ := protocol.LeaseMS(c.lease)
		c.timing = time.Duration(int32(leaseMS)) * time.Millisecond
	} else {
		c.timing = c.lease
	}
	released := make(chan struct{})
	go func() {
		for in.Scan() {
			c.release()
			c.o.print(`{"event":"released"}`)
		}
		close(released)
	}()
	c.run()
	<-released
	c.close()
}

type client struct {
	fault     string
	printLate time.Duration // between the give-up's decision and its lost line
	req       request
	name      string
	lease     time.Duration // what ACQUIRE carries
	timing    time.Duration // what the heartbeats and the give-up are timed by
	o         *out

	mu         sync.Mutex
	conn       net.Conn
	connClosed chan struct{} // closed once the session has closed conn
	released   bool
}

// release sends RELEASE and waits, up to min(lease, 2 s), for the session
// to see the server's close and close second; past that it resets the
// connection. It silences the session's loss report.
func (c *client) release() {
	c.mu.Lock()
	already := c.released
	c.released = true
	conn, closed := c.conn, c.connClosed
	c.mu.Unlock()
	if already || conn == nil {
		return
	}
	if c.fault == "fin-release" {
		_ = conn.Close()
		return
	}
	if _, err := conn.Write([]byte{byte(protocol.TypeRelease)}); err != nil {
		abort(conn)
		return
	}
	select {
	case <-closed:
	case <-time.After(min(c.lease, 2*time.Second)):
		if c.fault == "release-fin-at-bound" {
			_ = conn.Close()
			return
		}
		abort(conn)
	}
}

// abort closes conn with an RST (SO_LINGER 0): no TIME_WAIT.
func abort(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (c *client) isReleased() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released
}

func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// run makes sessions until one is granted or fails for good: in run mode a
// code below 0x10 is retried (after a random wait after 0x01, a backoff
// otherwise), in acquire mode nothing is.
func (c *client) run() {
	backoff := 100 * time.Millisecond
	for {
		code, retry := c.session()
		if !retry || c.req.Mode != "run" {
			return
		}
		wait := backoff
		if code == protocol.CodeShuttingDown {
			wait = rand.N(min(time.Second, c.lease/4) + 1)
			if c.fault == "no-jitter" {
				wait = 0
			}
		} else {
			backoff *= 2
		}
		time.Sleep(wait)
	}
}

// session is one connection: it returns the ERROR code that ended it before
// a grant and whether that may be retried.
func (c *client) session() (protocol.Code, bool) {
	conn, err := net.Dial("tcp", c.req.Address)
	if err != nil {
		c.o.print(`{"event":"unavailable","reason":"dial: %v"}`, err)
		return 0, false
	}
	closed := make(chan struct{})
	c.mu.Lock()
	c.conn, c.connClosed = conn, closed
	c.mu.Unlock()
	s := &session{client: c, conn: conn, answers: make(chan answer, 16), done: make(chan struct{})}
	defer close(closed)
	return s.run()
}

type answer struct{ sent, at time.Time }

type session struct {
	*client
	conn    net.Conn
	answers chan answer
	done    chan struct{}

	mu          sync.Mutex
	lastSend    time.Time
	outstanding bool
	clock       time.Time // the give-up clock's start
	granted     bool
	token       uint64
	over        bool
}

// end reports the loss (or the failure before the grant) once and stops the
// heartbeats.
func (s *session) end(lost, failed string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return false
	}
	s.over = true
	close(s.done)
	if s.isReleased() {
		return true
	}
	if s.granted {
		s.o.print("%s", lost)
	} else if failed != "" {
		s.o.print("%s", failed)
	}
	return true
}

func (s *session) send(b []byte) {
	s.mu.Lock()
	s.lastSend = time.Now()
	s.outstanding = true
	s.mu.Unlock()
	_, _ = s.conn.Write(b)
}

func (s *session) run() (protocol.Code, bool) {
	leaseMS, _ := protocol.LeaseMS(s.lease)
	s.send(protocol.AppendAcquire(nil, leaseMS, s.name))
	s.clock = s.lastSend
	if s.fault != "never-give-up" {
		go s.watch()
	}
	go s.heartbeat()
	var buf protocol.FrameBuffer
	var f protocol.Frame
	r := bufio.NewReader(s.conn)
	afterLate := false // the previous frame was a late answer, and more was read with it
	for {
		if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
			s.end(`{"event":"lost","reason":"end of stream"}`, `{"event":"unavailable","reason":"end of stream"}`)
			_ = s.conn.Close() // second, after the server's close
			return 0, false
		}
		at := time.Now()
		if s.fault != "error-before-deadline" && !s.isReleased() && s.pastGiveUp(at) {
			// The deadline first: the lock was lost by silence when it
			// passed; what was read since only says how the connection ends.
			s.giveUp()
			if f.Type == protocol.TypeError {
				_ = s.conn.Close()
				return 0, false
			}
			continue
		}
		if s.isReleased() {
			// Anything after RELEASE is the end, read on to the server's close.
			if f.Type == protocol.TypeError && s.fault == "error-after-release" {
				s.o.print(`{"event":"lost","reason":"ERROR","code":%d}`, f.Code)
			}
			continue
		}
		if afterLate && s.lateFault(f) {
			return 0, false
		}
		switch f.Type {
		case protocol.TypeError:
			code := f.Code
			s.mu.Lock()
			granted := s.granted
			s.mu.Unlock()
			if s.end(fmt.Sprintf(`{"event":"lost","reason":"ERROR","code":%d}`, code), "") && !granted {
				if s.req.Mode == "run" && code < 0x10 {
					_ = s.conn.Close()
					return code, true
				}
				s.o.print(`{"event":"error","code":%d,"retriable":%v,"reason":%q}`, code, code < 0x10, f.Reason)
			}
			_ = s.conn.Close()
			return code, false
		case protocol.TypeWaiting:
			if s.granted && s.fault != "waiting-after-grant" {
				s.end(`{"event":"lost","reason":"protocol violation: WAITING after ACQUIRED"}`, "")
				s.closeAfterWork()
				return 0, false
			}
		case protocol.TypeAcquired:
			s.mu.Lock()
			first := !s.granted
			changed := s.granted && f.Token != s.token
			s.granted, s.token = true, f.Token
			s.mu.Unlock()
			if changed && s.fault != "changed-token" {
				s.end(`{"event":"lost","reason":"protocol violation: the token changed"}`, "")
				s.closeAfterWork()
				return 0, false
			}
			if first {
				s.o.print(`{"event":"acquired","token":"%s"}`, strconv.FormatUint(f.Token, 10))
			}
		}
		s.mu.Lock()
		answered := s.outstanding // false: a pushed ACQUIRED, which answers nothing
		s.outstanding = false
		sent := s.lastSend
		if answered {
			s.clock = sent
			if s.fault == "give-up-from-receipt" {
				s.clock = at
			}
		}
		s.mu.Unlock()
		afterLate = answered && at.Sub(sent) > s.timing/4 && r.Buffered() > 0
		if answered {
			s.answers <- answer{sent: sent, at: at}
		}
	}
}

// lateFault applies the late-* faults to frame f, which followed a late
// answer in the same read; it reports whether the session is over.
func (s *session) lateFault(f protocol.Frame) bool {
	switch {
	case s.fault == "late-push-violation" && f.Type == protocol.TypeAcquired,
		s.fault == "late-error-no-code" && f.Type == protocol.TypeError:
		s.end(`{"event":"lost","reason":"protocol violation: a second answer"}`, `{"event":"unavailable","reason":"protocol violation: a second answer"}`)
	case s.fault == "late-0x01-no-retry" && f.Type == protocol.TypeError && f.Code == protocol.CodeShuttingDown:
		s.end(`{"event":"lost","reason":"ERROR","code":1}`, `{"event":"error","code":1,"retriable":true,"reason":"server shutting down"}`)
	default:
		return false
	}
	_ = s.conn.Close()
	return true
}

// heartbeat sends a heartbeat an interval after each answered request's send
// (after the answer with interval-after-reply).
func (s *session) heartbeat() {
	base := s.timing / 4
	if s.fault == "slow-heartbeat" {
		base = s.timing / 2
	}
	floor := min(100*time.Millisecond, s.timing/4)
	alpha := time.Duration(5) // 1/α
	if s.fault == "no-smoothing" {
		alpha = 1
	}
	var srtt time.Duration
	sampled := false
	for {
		var a answer
		select {
		case a = <-s.answers:
		case <-s.done:
			return
		}
		rtt := a.at.Sub(a.sent)
		if !sampled {
			srtt, sampled = rtt, true
		} else {
			srtt += (rtt - srtt) / alpha
		}
		interval := min(max(base-2*srtt, floor), base)
		from := a.sent
		if s.fault == "interval-after-reply" {
			from = a.at
		}
		select {
		case <-time.After(time.Until(from.Add(interval))):
		case <-s.done:
			return
		}
		if s.isReleased() {
			return // nothing follows RELEASE
		}
		s.send(protocol.AppendHeartbeat(nil))
	}
}

// limit is the give-up time after the clock's start: 0.8 × lease, or what
// the fault says.
func (s *session) limit() time.Duration {
	factor := 0.8
	switch s.fault {
	case "give-up-0.9":
		factor = 0.9
	case "give-up-0.95":
		factor = 0.95
	}
	return time.Duration(factor * float64(s.timing))
}

// pastGiveUp reports whether the give-up was due at at (never with
// never-give-up).
func (s *session) pastGiveUp(at time.Time) bool {
	if s.fault == "never-give-up" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return at.Sub(s.clock) > s.limit()
}

// watch gives up when no answer came within the limit of the clock's start.
func (s *session) watch() {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.isReleased() {
			return // the release ends the session, not the give-up
		}
		if !s.pastGiveUp(time.Now()) {
			continue
		}
		if s.fault == "error-before-deadline" {
			time.Sleep(50 * time.Millisecond) // a read that is ready goes first
		}
		s.giveUp()
		return
	}
}

// giveUp reports the give-up, stamped with its decision, once (the reader
// and the watch may both find it due), and closes after the work.
func (s *session) giveUp() {
	var decided unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &decided); err != nil {
		fmt.Fprintln(os.Stderr, "brokendriver: read CLOCK_MONOTONIC:", err)
		os.Exit(2)
	}
	time.Sleep(s.printLate)
	if s.end(fmt.Sprintf(`{"event":"lost","reason":"no answer within the give-up time","mono_ns":%d}`, decided.Nano()), `{"event":"unavailable","reason":"no answer within the give-up time"}`) {
		if s.fault == "close-at-give-up" {
			_ = s.conn.Close() // at once: the work still runs
		}
		s.closeAfterWork()
	}
}

// closeAfterWork stops the work (work_stop_ms after the loss) and closes the
// connection then, or when the lease has passed since the last send.
func (s *session) closeAfterWork() {
	s.mu.Lock()
	due := time.Until(s.lastSend.Add(s.lease))
	granted := s.granted
	s.mu.Unlock()
	if !granted {
		_ = s.conn.Close()
		return
	}
	if s.req.WorkStopMS < 0 {
		time.Sleep(due)
		_ = s.conn.Close()
		return
	}
	stop := time.Duration(s.req.WorkStopMS) * time.Millisecond
	time.Sleep(min(stop, due))
	_ = s.conn.Close()
	time.Sleep(stop - min(stop, due))
	s.o.print(`{"event":"work-stopped"}`)
}
