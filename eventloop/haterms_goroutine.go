package eventloop

import (
	"context"
	"fmt"
	"net"
	"time"
)

// A node of a cluster led through etcd (Config.HA) has a lock listener only
// while it serves: a follower refuses connections at connect, so a client
// with several addresses moves on to the next at once. The gnet engine runs
// for the whole life of the process, not per term: it carries the control
// connection (the admin API, ticks, the etcd side's events) and the liveness
// probe, which a follower serves too, and the accept loop that feeds it is
// ours, so opening and closing the Go listener (and its accept loop) is all
// a term changes. The loop decides (ha.go: wantListener, without waiting);
// serveTerms, on a goroutine of its own, does the I/O.

// haListenAddr is the lock port's address on a node of a cluster: a fixed
// one, since it is opened afresh each term and is what clients are given.
func haListenAddr(address string) (net.Addr, error) {
	addr, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	if addr.Port == 0 {
		return nil, fmt.Errorf("listen on %s: a node of a cluster opens its lock port each time it leads, and clients must find it there: give a fixed port, such as 0.0.0.0:7070", address)
	}
	return addr, nil
}

// wantListener is called on the loop: open (true) or close the lock
// listener. It never waits.
func (s *Server) wantListener(open bool) {
	s.listenWant.Store(open)
	select {
	case s.listenNudge <- struct{}{}:
	default:
	}
}

// serveTerms opens and closes the lock listener as the loop wants it, until
// Shutdown. It is Serve's accept side with Config.HA.
func (s *Server) serveTerms() {
	defer s.accepting.Done()
	var done chan struct{} // closed when the term's accept loop has returned
	closeTerm := func() {
		if s.ln == nil {
			return
		}
		close(s.acceptStop)
		_ = s.ln.Close()
		<-done
		s.ln = nil
		s.log.Info().Str("listen", s.addr.String()).Msg(HAClosedMessage)
	}
	for {
		select {
		case <-s.stopAccept:
			closeTerm()
			return
		case <-s.listenNudge:
		}
		want := s.listenWant.Load()
		switch {
		case want == (s.ln != nil):
		case !want:
			closeTerm()
		default:
			ln, err := listenLocks(s.cfg.ListenAddress)
			if err != nil {
				s.log.Error().Err(err).Msg("ha: the lock port cannot be opened; ending the term")
				s.endTermFor(err)
				continue
			}
			s.ln, s.acceptStop, done = ln, make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				s.acceptLoop()
			}()
			s.log.Info().Str("listen", s.addr.String()).Uint64("term", s.HAStatus().Term).Msg(HAServingMessage)
		}
	}
}

// endTermFor ends the term in progress because its lock port cannot be
// opened: a node that cannot serve must not keep the leadership.
func (s *Server) endTermFor(err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.call(ctx, func(o *owner) {
		if o.ha.serving {
			o.endTerm("the lock port could not be opened: " + err.Error())
		}
	})
}
