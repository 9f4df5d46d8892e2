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

	"github.com/monolock/monolock/internal/hostcheck"
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
	mux := NewHandler(prometheus.NewRegistry(), h, nil)
	expect(t, mux, "/healthz", 200, "ok")
	expect(t, mux, "/readyz", 200, "ok")
}

// TestProbesStuckLoop: a loop that does not answer fails both probes, though
// the HTTP server itself still answers.
func TestProbesStuckLoop(t *testing.T) {
	h := &Health{Live: stuck, LiveTimeout: 10 * time.Millisecond}
	mux := NewHandler(prometheus.NewRegistry(), h, nil)
	expect(t, mux, "/healthz", 503, "event loop did not answer within 10ms")
	expect(t, mux, "/readyz", 503, "event loop did not answer within 10ms")
}

func TestProbesLoopGone(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return errors.New("event loop stopped") }}
	mux := NewHandler(prometheus.NewRegistry(), h, nil)
	expect(t, mux, "/healthz", 503, "event loop did not answer: event loop stopped")
}

// TestReadyzNotReady: the audit log failing takes the server out of
// rotation but does not make it dead: restarting would not fix the disk.
func TestReadyzNotReady(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return nil }, Ready: func() error { return errors.New("audit log writes failing: disk full") }}
	mux := NewHandler(prometheus.NewRegistry(), h, nil)
	expect(t, mux, "/healthz", 200, "ok")
	expect(t, mux, "/readyz", 503, "audit log writes failing: disk full")
}

func TestProbesDraining(t *testing.T) {
	h := &Health{}
	mux := NewHandler(prometheus.NewRegistry(), h, nil)
	expect(t, mux, "/readyz", 200, "ok")
	h.Drain()
	expect(t, mux, "/healthz", 503, "shutting down")
	expect(t, mux, "/readyz", 503, "shutting down")
}

// TestHostRule: with a Host rule every route answers an address (a pod's
// IP, as Prometheus and kubelet send it), localhost and listed names, and
// refuses any other name with 421 naming the setting; the rule runs before
// the probes, so a refused request reads nothing.
func TestHostRule(t *testing.T) {
	h := &Health{Live: func(context.Context) error { return nil }}
	mux := NewHandler(prometheus.NewRegistry(), h, hostcheck.New([]string{"monolock.prod.svc"}, "-http-allowed-hosts"))
	for _, c := range []struct {
		host string
		code int
	}{
		{"10.1.2.3:9090", 200}, {"[fd00::7]:9090", 200}, {"localhost:9090", 200},
		{"monolock.prod.svc:9090", 200}, {"attacker.example:9090", 421}, {"attacker.example", 421},
	} {
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = c.host
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != c.code {
				t.Errorf("%s with Host %s: %d, want %d", path, c.host, rec.Code, c.code)
			}
			if c.code == 421 && !strings.Contains(rec.Body.String(), "-http-allowed-hosts") {
				t.Errorf("%s with Host %s: the refusal %q does not name the setting", path, c.host, rec.Body.String())
			}
		}
	}
}
