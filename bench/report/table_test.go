package report

import (
	"github.com/monolock/monolock/bench/hist"
	"strings"
	"testing"
)

func TestFormatDuration(t *testing.T) {
	cases := map[int64]string{
		0: "0ns", 999: "999ns", 1000: "1.00µs", 12_345: "12.3µs", 123_456: "123µs",
		1_500_000: "1.50ms", 25_000_000: "25.0ms", 2_000_000_000: "2.00s", 75_000_000_000: "75.0s",
		-1_500_000: "-1.50ms",
	}
	for ns, want := range cases {
		if got := FormatDuration(ns); got != want {
			t.Errorf("FormatDuration(%d) = %q, want %q", ns, got, want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	cases := []struct {
		v    float64
		unit string
		want string
	}{
		{21345.4, "/s", "21,345 /s"},
		{1234567, "", "1,234,567"},
		{812, "B", "812 B"},
		{9.4913, "s", "9.49 s"},
		{0.0123, "ms", "0.0123 ms"},
		{0, "", "0"},
		{-4321, "", "-4,321"},
	}
	for _, c := range cases {
		if got := FormatValue(c.v, c.unit); got != c.want {
			t.Errorf("FormatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestGroupThousands(t *testing.T) {
	cases := map[int64]string{0: "0", 999: "999", 1000: "1,000", 19500: "19,500", 123456789: "123,456,789", -1000: "-1,000", -999: "-999"}
	for n, want := range cases {
		if got := GroupThousands(n); got != want {
			t.Errorf("GroupThousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatRatio(t *testing.T) {
	cases := map[float64]string{1: "1.00×", 0.421: "0.421×", 17.34: "17.3×", 250: "250×", 12345: "12,345×"}
	for r, want := range cases {
		if got := FormatRatio(r); got != want {
			t.Errorf("FormatRatio(%v) = %q, want %q", r, got, want)
		}
	}
}

func TestFormatTableAligns(t *testing.T) {
	out := FormatTable([]string{"system", "value"}, [][]string{{"monolock", "1"}, {"µs", "22,222"}}, []bool{false, true})
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{
		"system     value",
		"--------  ------",
		"monolock       1",
		"µs        22,222",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(lines), out)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

func TestRenderScenarioAndRatios(t *testing.T) {
	floor := &Scenario{ID: "S0", Name: "floor", Desc: "d", Rows: []*Row{
		{System: SysFloor, Figure: "cycles", Value: 200, Unit: "/s", Key: "cycleC", Floor: "cycleC"},
	}}
	sc := &Scenario{ID: "S1", Name: "cycle", Desc: "desc", Rows: []*Row{
		{System: SysMonolock, Figure: "cycles/s", Value: 100, Unit: "/s", Key: "cycle", Floor: "cycleC",
			Lat: &hist.Summary{N: 3, P50: 1500, P90: 2000, P99: 3_000_000, Max: 4_000_000}},
		{System: "redis", Figure: "cycles/s", Value: 25, Unit: "/s", Key: "cycle", Floor: "cycleC"},
		{System: "etcd", Figure: "cycles/s", Status: "skipped", Note: "not installed"},
	}}
	sc.Note("a note")
	ComputeRatios([]*Scenario{floor, sc})
	if r := sc.Rows[1]; r.VsMonolock == nil || *r.VsMonolock != 0.25 || r.VsFloor == nil || *r.VsFloor != 0.125 {
		t.Fatalf("redis ratios: %v %v", r.VsMonolock, r.VsFloor)
	}
	if r := sc.Rows[2]; r.VsMonolock != nil || r.VsFloor != nil {
		t.Fatal("a skipped row has no ratios")
	}
	out := RenderScenario(sc)
	for _, want := range []string{
		"S1 cycle — desc",
		"monolock  cycles/s   100 /s  1.50µs  2.00µs  3.00ms  4.00ms      1.00×  0.500×",
		"redis     cycles/s    25 /s       –       –       –       –     0.250×  0.125×",
		"etcd      cycles/s  skipped       –",
		"  · a note",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
