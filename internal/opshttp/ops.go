// Package opshttp serves the operations endpoints: Prometheus metrics and the
// health checks that orchestrators probe. It also builds the HTTP servers of
// the ops and admin ports (see NewServer), bounded so that their clients
// cannot take the descriptors the lock port needs.
package opshttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/monolock/monolock/internal/hostcheck"
)

// DefaultLiveTimeout bounds the liveness round trip: a loop that has not run
// a closure within a second serves no client either.
const DefaultLiveTimeout = time.Second

// Health is the server's health as probes see it.
//
// /healthz (liveness) answers 200 while the event loop answers a round trip
// (Live). /readyz (readiness) also wants Ready to report nothing. Both answer
// 503 at once when shutdown begins (Drain), so that load balancers stop
// sending clients while the sessions are being closed.
type Health struct {
	// Live makes a round trip through the event loop's socket path: it
	// returns nil once the loop has served it as it serves a client, or ctx's
	// error. nil counts as alive.
	Live func(ctx context.Context) error
	// Ready returns why the server should get no new clients although its
	// loop lives (the audit log failing), or nil. nil counts as ready.
	Ready func() error
	// LiveTimeout bounds Live; zero means DefaultLiveTimeout.
	LiveTimeout time.Duration

	draining atomic.Bool
}

// Drain switches /healthz and /readyz to 503. It cannot be undone.
func (h *Health) Drain() { h.draining.Store(true) }

// Draining reports whether Drain was called.
func (h *Health) Draining() bool { return h.draining.Load() }

var errDraining = errors.New("shutting down")

// Alive returns nil when the event loop answers within LiveTimeout, and
// otherwise why not.
func (h *Health) Alive(ctx context.Context) error {
	if h.Draining() {
		return errDraining
	}
	if h.Live == nil {
		return nil
	}
	timeout := h.LiveTimeout
	if timeout <= 0 {
		timeout = DefaultLiveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.Live(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("event loop did not answer within %s", timeout)
		}
		return fmt.Errorf("event loop did not answer: %w", err)
	}
	return nil
}

// Readiness returns nil when the server is alive and Ready reports nothing,
// and otherwise why not.
func (h *Health) Readiness(ctx context.Context) error {
	if err := h.Alive(ctx); err != nil {
		return err
	}
	if h.Ready != nil {
		return h.Ready()
	}
	return nil
}

// NewHandler serves GET /metrics from g, and /healthz and /readyz from h,
// each only to the Host headers hosts answers (421 to the others: a page
// that rebinds its name to this port must not read the metrics); nil
// answers every Host.
func NewHandler(g prometheus.Gatherer, h *Health, hosts *hostcheck.Rule) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", probe(h.Alive))
	mux.HandleFunc("GET /readyz", probe(h.Readiness))
	return hosts.Guard(mux, hostcheck.PlainText)
}

func probe(check func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := check(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "%v\n", err)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
