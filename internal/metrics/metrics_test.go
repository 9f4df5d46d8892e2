package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeAudit struct {
	errors, dropped uint64
	pending         int
}

func (f *fakeAudit) WriteErrors() uint64   { return f.errors }
func (f *fakeAudit) DroppedEvents() uint64 { return f.dropped }
func (f *fakeAudit) PendingBytes() int     { return f.pending }

// TestRegisterAudit: the series read the audit log's state at scrape time.
func TestRegisterAudit(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := &fakeAudit{errors: 3, dropped: 7, pending: 4096}
	RegisterAudit(reg, a)
	want := map[string]float64{
		"monolock_audit_write_errors_total":   3,
		"monolock_audit_dropped_events_total": 7,
		"monolock_audit_pending_bytes":        4096,
	}
	check := func() {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range families {
			for _, m := range mf.Metric {
				switch {
				case m.Counter != nil:
					got[mf.GetName()] = m.Counter.GetValue()
				case m.Gauge != nil:
					got[mf.GetName()] = m.Gauge.GetValue()
				}
			}
		}
		for name, v := range want {
			if got[name] != v {
				t.Errorf("%s = %v, want %v", name, got[name], v)
			}
		}
	}
	check()
	a.errors, a.dropped, a.pending = 4, 9, 0
	want["monolock_audit_write_errors_total"], want["monolock_audit_dropped_events_total"], want["monolock_audit_pending_bytes"] = 4, 9, 0
	check()
	if n := count(t, reg); n != 3 {
		t.Errorf("%d series registered, want 3", n)
	}
}

// TestRegisterAuditNil: no registry or no audit log registers nothing and
// does not panic, like the rest of the package.
func TestRegisterAuditNil(t *testing.T) {
	RegisterAudit(nil, &fakeAudit{})
	reg := prometheus.NewRegistry()
	RegisterAudit(reg, nil)
	if n := count(t, reg); n != 0 {
		t.Errorf("%d series registered with a nil source", n)
	}
}

func count(t *testing.T, g prometheus.Gatherer) int {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(families)
}

// TestRegisterAdmin: every role's series exists from the start, at 0, and
// counts its own refusals only.
func TestRegisterAdmin(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := RegisterAdmin(reg)
	m.AdminRefused("release")
	m.AdminRefused("release")
	m.AdminRefused("kick")
	m.AdminRefused("no-such-role") // ignored, not a new series
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != "monolock_admin_denials_total" {
			t.Errorf("unexpected family %s", mf.GetName())
			continue
		}
		for _, s := range mf.Metric {
			got[s.Label[0].GetValue()] = s.Counter.GetValue()
		}
	}
	want := map[string]float64{"read": 0, "release": 2, "kick": 1}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for role, v := range want {
		if got[role] != v {
			t.Errorf(`monolock_admin_denials_total{role=%q} = %v, want %v`, role, got[role], v)
		}
	}
}
