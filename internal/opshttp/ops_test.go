package opshttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func probeGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func expect(t *testing.T, h http.Handler, path string, code int, body string) {
	t.Helper()
	gotCode, gotBody := probeGet(t, h, path)
	if gotCode != code || !strings.Contains(gotBody, body) {
		t.Errorf("%s: %d %q, want %d with %q", path, gotCode, gotBody, code, body)
	}
}

// stuck is an event loop that never runs what it is given.
func stuck(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestProbesHealthy(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return nil }, Ready: func() error { return nil }}
	mux := NewHandler(prometheus.NewRegistry(), h)
	expect(t, mux, "/healthz", 200, "ok")
	expect(t, mux, "/readyz", 200, "ok")
}

// TestProbesStuckLoop: a loop that does not answer fails both probes, though
// the HTTP server itself still answers.
func TestProbesStuckLoop(t *testing.T) {
	h := &Health{Live: stuck, LiveTimeout: 10 * time.Millisecond}
	mux := NewHandler(prometheus.NewRegistry(), h)
	expect(t, mux, "/healthz", 503, "event loop did not answer within 10ms")
	expect(t, mux, "/readyz", 503, "event loop did not answer within 10ms")
}

func TestProbesLoopGone(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return errors.New("event loop stopped") }}
	mux := NewHandler(prometheus.NewRegistry(), h)
	expect(t, mux, "/healthz", 503, "event loop did not answer: event loop stopped")
}

// TestReadyzNotReady: the audit log failing takes the server out of
// rotation but does not make it dead: restarting would not fix the disk.
func TestReadyzNotReady(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return nil }, Ready: func() error { return errors.New("audit log writes failing: disk full") }}
	mux := NewHandler(prometheus.NewRegistry(), h)
	expect(t, mux, "/healthz", 200, "ok")
	expect(t, mux, "/readyz", 503, "audit log writes failing: disk full")
}

func TestProbesDraining(t *testing.T) {
	h := &Health{}
	mux := NewHandler(prometheus.NewRegistry(), h)
	expect(t, mux, "/readyz", 200, "ok")
	h.Drain()
	expect(t, mux, "/healthz", 503, "shutting down")
	expect(t, mux, "/readyz", 503, "shutting down")
}
