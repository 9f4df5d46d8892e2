package eventloop

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// Limits on what the server buffers for one peer. A client may pipeline
// heartbeats without reading replies; once outboundLimit bytes of replies wait
// in user space the server stops parsing that client's input, and once
// inboundLimit bytes of unparsed input pile up behind that, the peer is
// plainly not draining and is closed. Together with io-timeout they bound the
// memory a stuck or hostile peer can make the server hold.
const (
	outboundLimit = 16 << 10
	inboundLimit  = 64 << 10
	replyBatch    = 8 << 10 // answers collected before a write, well below outboundLimit

	// bytesPerTurn bounds the input parsed for one session before the loop
	// serves the others; the rest waits for the session's next turn. It
	// matches gnet's largest read, so a pipelining client that reads its
	// replies is never left behind (a turn of 64 Ki heartbeats takes a few
	// milliseconds), while one that does not read is closed by the limits
	// above.
	bytesPerTurn = 64 << 10
	// maxUnparsed closes a session whose unparsed input still grows although
	// its output drains: it sends faster than the server can parse.
	maxUnparsed = 4 * inboundLimit
)

// Timer wheel geometry: 1 ms ticks keep lease expiry within a few ms of the
// deadline; 4096 slots cover about four seconds per turn.
const (
	wheelTick  = time.Millisecond
	wheelSlots = 4096
	// stallPoll is how often a session with undrained output is looked at:
	// gnet reports no "drained" event, so the owner polls the few stuck ones.
	stallPoll = 10 * time.Millisecond
)

// owner is the state that only the event-loop goroutine touches: the lock
// table, the timer wheel and every session. Its methods run on that goroutine,
// one turn at a time (turn.go): time comes in once per turn, effects go out
// at its end. It reaches connections only through the conn interface, so its
// rules can be driven by a test without sockets.
//
// Its rules live in files named for their step: frames.go parses input,
// answers and rejects it, timers.go runs deadlines, release.go ends
// sessions (one, all at shutdown, the oldest at the descriptor limit) and
// promotes waiters. turn.go applies what they decide.
type owner struct {
	log       zerolog.Logger
	denyLog   zerolog.Logger // ACL denials, sampled: a refused client may retry in a loop
	ioTimeout time.Duration
	silence   time.Duration // a waiter silent this long may be evicted (Config.WaiterSilenceLimit)

	clk   Clock
	wall0 time.Time     // the wall clock at mono0, to show offsets to people
	mono0 time.Duration // the clock's offset when the owner started

	table    *locktable.Table[*session]
	wheel    *timerwheel.Wheel[*session]
	sessions sessionList
	fire     func(*timerwheel.Timer[*session])

	metrics    Metrics
	audit      AuditRecorder
	authorizer Authorizer // nil when no ACL is configured

	// Counts since start, for the admin API (Stats) without Metrics.
	grants   uint64 // fencing tokens issued
	expiries uint64 // holders whose lease ran out

	frame protocol.Frame             // decoded in place, reused for every frame
	out   [protocol.MaxErrorLen]byte // encoded in place, reused for every reply

	// The turn in progress (turn.go).
	wall    time.Time     // the wall clock when it began
	now     time.Duration // the monotonic offset when it began
	inTurn  bool          // between begin and the end of end
	effects []effect      // what the rules decided, in order
	outbuf  []byte        // the bytes of its write effects
	later   []*session    // sessions gnet closed during the turn: their next turns
	armed   time.Duration // the earliest deadline armed; 0 for none
	ticked  bool          // the turn advanced the wheel
	fired   int           // timers run by the tick in progress

	wakeup wakeup // when the ticker should next hand the owner a tick

	shuttingDown bool

	ha haState // failover through etcd (ha.go); off without Config.HA
}

// denialsPerSecond bounds the log lines of ACL denials; the metric counts
// every one.
const denialsPerSecond = 10

func newOwner(cfg Config, clk Clock) *owner {
	if cfg.TestWallClockOffset != nil && cfg.HA == nil {
		clk = offsetClock{Clock: clk, offset: cfg.TestWallClockOffset}
	}
	o := &owner{
		log:        cfg.Logger,
		denyLog:    cfg.Logger.Sample(&zerolog.BurstSampler{Burst: denialsPerSecond, Period: time.Second}),
		ioTimeout:  cfg.IOTimeout,
		silence:    cfg.WaiterSilenceLimit,
		clk:        clk,
		table:      locktable.New[*session](),
		wheel:      timerwheel.New[*session](wheelTick, wheelSlots),
		metrics:    cfg.Metrics,
		audit:      cfg.Audit,
		authorizer: cfg.Authorizer,
	}
	o.wall0, o.mono0 = clk.Now()
	o.fire = o.fireBounded
	o.wakeup.init()
	return o
}

// wallAt converts a monotonic offset back to wall-clock time for people.
func (o *owner) wallAt(d time.Duration) time.Time { return o.wall0.Add(d - wheelTick) }

// open registers a new connection, plain or a *tlsSession. One io-timeout from
// now covers a TLS handshake and the ACQUIRE together.
func (o *owner) open(c conn) *session {
	s := &session{conn: c, since: o.now, lastSeen: o.now}
	s.claim.Value = s
	s.timer.Value = s
	c.SetContext(s)
	o.sessions.add(s, sourceOf(c.RemoteAddr()))
	o.metrics.Opened()
	o.schedule(s, o.now+o.ioTimeout)
	return s
}
