package eventloop

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/protocol"
)

// The published meanings of the counters: acquires_total counts granted
// ownerships (issued tokens), not ACQUIRE frames; protocol_errors_total
// counts every ERROR sent, also at shutdown and by an administrator.
func TestMetricMeanings(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	r := newRig(t, Config{Metrics: m})
	counter := func(name string, labels ...string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
		next:
			for _, s := range f.Metric {
				for i := 0; i+1 < len(labels); i += 2 {
					found := false
					for _, l := range s.Label {
						found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
					}
					if !found {
						continue next
					}
				}
				return s.GetCounter().GetValue()
			}
		}
		return 0
	}
	code := func(c protocol.Code) string { return c.Label() }

	holder := r.acquire("job", 60_000)
	w1 := r.acquire("job", 60_000)
	w2 := r.acquire("job", 60_000)
	w3 := r.acquire("job", 60_000)
	if got := counter("monolock_acquires_total"); got != 1 {
		t.Fatalf("4 ACQUIREs, 1 grant: acquires_total = %v, want 1", got)
	}
	_ = holder.closeNow() // w1 is promoted
	if got := counter("monolock_acquires_total"); got != 2 {
		t.Fatalf("after a promotion: acquires_total = %v, want 2", got)
	}
	srv := r.server()
	ctx := context.Background()
	if _, ok, err := srv.ForceRelease(ctx, "job"); err != nil || !ok { // w1 loses it, w2 is promoted
		t.Fatalf("ForceRelease: %v, %v", ok, err)
	}
	if ok, err := srv.KickWaiter(ctx, "job", w3.RemoteAddr().String()); err != nil || !ok {
		t.Fatalf("KickWaiter: %v, %v", ok, err)
	}
	if got := counter("monolock_acquires_total"); got != 3 {
		t.Fatalf("after a force-release: acquires_total = %v, want 3", got)
	}
	if got := counter("monolock_protocol_errors_total", "code", code(protocol.CodeClosedByAdmin)); got != 2 {
		t.Fatalf("a force-release and a kick: protocol_errors_total{0x02} = %v, want 2", got)
	}
	r.turnOf(r.o.shutdown)
	if got := counter("monolock_protocol_errors_total", "code", code(protocol.CodeShuttingDown)); got != 1 {
		t.Fatalf("shutdown with one session left: protocol_errors_total{0x01} = %v, want 1", got)
	}
	_, _ = w1, w2
}
