package eventloop

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"
)

// Server is a running monolock protocol server.
type Server struct {
	cfg Config
	log zerolog.Logger
	// chainLog logs client chains refused by a bound, sampled: whoever
	// sends one retries in a loop. Handshake goroutines write to it.
	chainLog zerolog.Logger
	metrics  Metrics
	ln       net.Listener // the lock listener; with Config.HA only while the node serves (haterms_goroutine.go)
	addr     net.Addr     // the lock listener's address
	engine   *gnet.Client
	handler  *handler
	ctlPeer  net.Conn   // our end of the control connection; keeps it open
	calls    *callQueue // work for the loop from other goroutines
	reads    sharedReads
	prober   *prober // the liveness probe's end of its socket pair

	spare      spareDescriptor
	door       door            // the accept loop's way in at the descriptor limit (accept.go)
	handshakes *handshakeSlots // TLS handshakes in flight
	tlsLoop    *tlsLoop        // nil without TLS

	stopAccept chan struct{}  // closed when Shutdown begins
	acceptStop chan struct{}  // stops the accept loop: stopAccept, or with Config.HA the term's (haterms_goroutine.go)
	accepting  sync.WaitGroup // the accept loop (with Config.HA, serveTerms), counted from New

	listenWant  atomic.Bool    // with Config.HA: the loop wants the lock listener open
	listenNudge chan struct{}  // cap 1: listenWant changed
	serveOnce   sync.Once      // Serve starts the accept loop, or Shutdown rules it out
	stopTicks   chan struct{}  // closed when the loop stops
	ticking     sync.WaitGroup // the tick goroutine
	stopped     chan struct{}  // closed when Shutdown has finished
	stopOnce    sync.Once
	stopErr     error

	dead     chan struct{} // closed when the event loop stopped on its own
	deadOnce sync.Once
	deadErr  error
}

// New binds the listener and starts the event loop. Connections are accepted
// once Serve runs.
func New(cfg Config) (*Server, error) {
	return newServer(cfg, newSystemClock())
}

func newServer(cfg Config, clk Clock) (*Server, error) {
	cfg = cfg.withDefaults()
	var (
		ln   net.Listener
		addr net.Addr
		err  error
	)
	if cfg.HA == nil {
		if ln, err = listenLocks(cfg.ListenAddress); err != nil {
			return nil, err
		}
		addr = ln.Addr()
	} else if addr, err = haListenAddr(cfg.ListenAddress); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		chainLog:   cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 1, Period: time.Second}),
		metrics:    cfg.Metrics,
		ln:         ln,
		addr:       addr,
		handshakes: newHandshakeSlots(cfg.MaxTLSHandshakes),
		stopAccept: make(chan struct{}),
		stopTicks:  make(chan struct{}),
		stopped:    make(chan struct{}),
		dead:       make(chan struct{}),
	}
	if cfg.TLS != nil {
		s.tlsLoop = newTLSLoop()
	}
	s.acceptStop = s.stopAccept
	s.listenNudge = make(chan struct{}, 1)
	s.calls = newCallQueue(s.wakeLoop)
	s.spare.open()
	s.door.open()
	s.handler = newHandler(newOwner(cfg, clk), s)
	s.handler.owner.initHA(cfg.HA, s.wantListener)
	s.engine, err = gnet.NewClient(s.handler,
		gnet.WithMulticore(false),
		gnet.WithNumEventLoop(1),
		gnet.WithTCPNoDelay(gnet.TCPDelay), // Go's accept already set TCP_NODELAY on the socket
		gnet.WithLogger(gnetLogger{cfg.Logger}),
	)
	if err == nil {
		err = s.engine.Start()
	}
	if err == nil {
		err = s.openControl()
	}
	if err == nil {
		err = s.openProbe()
	}
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		s.spare.close()
		s.door.close()
		if s.ctlPeer != nil {
			_ = s.ctlPeer.Close()
		}
		if s.engine != nil {
			_ = s.engine.Stop()
		}
		return nil, fmt.Errorf("start event loop: %w", err)
	}
	s.accepting.Add(1)
	s.ticking.Add(1)
	go func() {
		defer s.ticking.Done()
		if err := tickLoop(&s.handler.owner.wakeup, s.tick, s.stopTicks); err != nil {
			s.fail(err)
		}
	}()
	return s, nil
}

// listenLocks opens the lock listener.
func listenLocks(address string) (net.Listener, error) {
	// No TCP keep-alive: the client's lease is the failure detector, and
	// Go's default costs four setsockopt calls per accepted connection.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	return ln, nil
}

// Addr returns the protocol listener's address; with Config.HA, the
// address it listens on while the node serves.
func (s *Server) Addr() net.Addr { return s.addr }

// Serve accepts connections until Shutdown, then waits for it to finish. It
// returns nil after a Shutdown, and an error at once if the event loop stops
// on its own: the process should then exit and be restarted. With
// Config.HA it accepts only while the node serves (haterms_goroutine.go).
func (s *Server) Serve() error {
	s.serveOnce.Do(func() {
		if s.cfg.HA != nil {
			go s.serveTerms()
			return
		}
		go func() {
			defer s.accepting.Done()
			s.acceptLoop()
		}()
	})
	select {
	case <-s.stopped:
		return s.stopErr
	case <-s.dead:
		return s.deadErr
	}
}

// fail records that the event loop is gone; Serve returns err.
func (s *Server) fail(err error) {
	s.deadOnce.Do(func() {
		s.deadErr = err
		s.log.Error().Err(err).Msg("the event loop stopped; no session can be served")
		close(s.dead)
	})
}

// handshakeGrace is how long Shutdown lets TLS handshakes in flight finish,
// so that their clients too are told ERROR 0x01, before it cuts the rest.
const handshakeGrace = time.Second

// Shutdown stops accepting, sends ERROR 0x01 to every session and closes it
// without promoting anyone, then stops the event loop. It returns when all of
// that is done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		go func() {
			defer close(s.stopped)
			close(s.stopAccept)
			if s.cfg.HA == nil {
				_ = s.ln.Close()
			} // else serveTerms closes the term's listener
			s.serveOnce.Do(s.accepting.Done) // Serve was never called
			s.accepting.Wait()
			if err := s.call(context.Background(), func(o *owner) { o.shutdown() }); err != nil {
				s.stopErr = err
			}
			// From here on a session that joins is refused with ERROR 0x01
			// (OnOpen), so a handshake finishing now is told, not granted.
			s.handshakes.stop(handshakeGrace)
			close(s.stopTicks)
			s.ticking.Wait()
			if err := s.engine.Stop(); err != nil && s.stopErr == nil {
				s.stopErr = fmt.Errorf("stop event loop: %w", err)
			}
			_ = s.ctlPeer.Close()
			_ = s.prober.peer.Close()
			s.spare.close() // the accept loop has returned
			s.door.close()
		}()
	})
	select {
	case <-s.stopped:
		return s.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}
