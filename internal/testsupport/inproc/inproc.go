// Package inproc runs a monolock server inside the test process: the event
// loop and its accept goroutine, without the binary's HTTP sides, signals or
// settings. Tests of the loop, the client, the admin API and monolockctl
// start their servers through it; tests of the binary use package proc.
package inproc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
)

// DefaultSafety bounds Shutdown and the end of Serve. It is a net against a
// hung test, never a timing assertion.
const DefaultSafety = 10 * time.Second

// Server is a running in-process server.
type Server struct {
	*eventloop.Server
	served chan error // Serve's result
	once   sync.Once
	err    error // what stopping found wrong
}

// Start starts a server with cfg and stops it when the test ends, failing
// the test if Shutdown fails or Serve does not then return nil. An empty
// ListenAddress is 127.0.0.1 with a free port; the zero Logger logs nothing.
func Start(t testing.TB, cfg eventloop.Config) *Server {
	t.Helper()
	if cfg.ListenAddress == "" {
		cfg.ListenAddress = "127.0.0.1:0"
	}
	srv, err := eventloop.New(cfg)
	if err != nil {
		t.Fatalf("start an in-process server: %v", err)
	}
	s := &Server{Server: srv, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve() }()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Stop shuts the server down: Shutdown, then Serve must return nil, each
// within DefaultSafety. Only the first call stops; every call returns what
// it found wrong. A test may also call Shutdown itself: Stop then checks
// what followed.
func (s *Server) Stop() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultSafety)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			s.err = fmt.Errorf("shutdown: %w", err)
			return
		}
		select {
		case err := <-s.served:
			if err != nil {
				s.err = fmt.Errorf("serve returned after shutdown: %w", err)
			}
		case <-time.After(DefaultSafety):
			s.err = fmt.Errorf("serve did not return within %v of shutdown", DefaultSafety)
		}
	})
	return s.err
}
