package eventloop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop/metrics"
)

// Server is a running monolock protocol server.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	metrics *metrics.Metrics
	ln      net.Listener
	engine  *gnet.Client
	handler *handler
	ctlPeer net.Conn // our end of the control connection; keeps it open

	stopAccept chan struct{} // closed when Shutdown begins
	accepting  sync.WaitGroup
	stopTicks  chan struct{}  // closed when the loop stops
	ticking    sync.WaitGroup // the tick goroutine
	bridges    sync.WaitGroup // TLS handshakes and bridges
	stopped    chan struct{}  // closed when Shutdown has finished
	stopOnce   sync.Once
	stopErr    error
}

// New binds the listener and starts the event loop. Connections are accepted
// once Serve runs.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	// No TCP keep-alive: the client's lease is the failure detector, and
	// Go's default costs four setsockopt calls per accepted connection.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.ListenAddress, err)
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		ln:         ln,
		stopAccept: make(chan struct{}),
		stopTicks:  make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	s.cfg, s.metrics = cfg, cfg.Metrics
	s.handler = newHandler(newOwner(cfg))
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
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("start event loop: %w", err)
	}
	s.ticking.Add(1)
	go func() {
		defer s.ticking.Done()
		s.handler.tickLoop(s.stopTicks)
	}()
	return s, nil
}

// openControl enrolls one end of a socket pair into the loop. gnet hands out
// its EventLoop only through a connection, and the server needs it to run
// ticks and requests on the loop before any client connects.
func (s *Server) openControl() error {
	inner, outer, err := socketPair()
	if err != nil {
		return fmt.Errorf("control %w", err)
	}
	if _, err := s.engine.EnrollContext(inner, control{}); err != nil {
		_ = outer.Close()
		return fmt.Errorf("enroll control connection: %w", err)
	}
	s.ctlPeer = outer
	if s.handler.loop.Load() == nil {
		return errors.New("control connection opened without an event loop")
	}
	return nil
}

// Addr returns the protocol listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// SetAuthorizer replaces the access-control decision for new ACQUIREs; nil
// allows every lock. Sessions already granted or queued are not re-judged.
func (s *Server) SetAuthorizer(ctx context.Context, a Authorizer) error {
	return s.onLoop(ctx, func(o *owner) { o.authorizer = a })
}

// Serve accepts connections until Shutdown, then waits for it to finish. It
// returns nil after a Shutdown.
func (s *Server) Serve() error {
	s.accepting.Add(1)
	s.acceptLoop()
	<-s.stopped
	return s.stopErr
}

// Shutdown stops accepting, sends ERROR 0x01 to every session and closes it
// without promoting anyone, then stops the event loop. It returns when all of
// that is done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		go func() {
			defer close(s.stopped)
			close(s.stopAccept)
			_ = s.ln.Close()
			s.accepting.Wait()
			if err := s.onLoop(context.Background(), func(o *owner) { o.shutdown() }); err != nil {
				s.stopErr = err
			}
			// TLS bridges end once the loop closed their inner ends.
			s.bridges.Wait()
			close(s.stopTicks)
			s.ticking.Wait()
			if err := s.engine.Stop(); err != nil && s.stopErr == nil {
				s.stopErr = fmt.Errorf("stop event loop: %w", err)
			}
			_ = s.ctlPeer.Close()
		}()
	})
	select {
	case <-s.stopped:
		return s.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onLoop runs fn on the event loop and waits for it.
func (s *Server) onLoop(ctx context.Context, fn func(*owner)) error {
	done := make(chan struct{})
	loop := *s.handler.loop.Load()
	err := loop.Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
		defer close(done)
		fn(s.handler.owner)
		return nil
	}))
	if err != nil {
		return fmt.Errorf("run on event loop: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats is a snapshot of the server's state.
type Stats struct {
	Sessions int // open connections
	Locks    int // locks with a holder
	Waiters  int // sessions queued behind a holder
	Timers   int // armed timers
}

// Stats reads a consistent snapshot on the event loop.
func (s *Server) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.onLoop(ctx, func(o *owner) {
		st = Stats{Sessions: o.sessions.len, Locks: o.table.Held(), Waiters: o.table.Waiting(), Timers: o.wheel.Len()}
	})
	return st, err
}
