// Package opshttp serves the operations endpoints: Prometheus metrics and the
// health checks that orchestrators probe.
package opshttp

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is the server's health as probes see it: healthy until shutdown
// begins, then 503 at once so that load balancers stop sending clients while
// the sessions are being closed.
type Health struct{ draining atomic.Bool }

// Drain switches /healthz and /readyz to 503. It cannot be undone.
func (h *Health) Drain() { h.draining.Store(true) }

// Draining reports whether Drain was called.
func (h *Health) Draining() bool { return h.draining.Load() }

// NewHandler serves GET /metrics from g, and /healthz and /readyz from h.
func NewHandler(g prometheus.Gatherer, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	probe := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if h.Draining() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("shutting down\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
	mux.HandleFunc("GET /healthz", probe)
	mux.HandleFunc("GET /readyz", probe)
	return mux
}
