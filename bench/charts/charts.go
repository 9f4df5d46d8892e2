// Package charts draws the report's PNG charts (gonum/plot).
package charts

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/monolock/monolock/bench/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one set of bars (or one line) in a chart.
type series struct {
	name   string
	values []float64
}

// Write draws one PNG per scenario into dir and returns their paths.
func Write(rep *report.Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, sc := range rep.Scenarios {
		path := filepath.Join(dir, strings.ToLower(sc.ID)+"-"+strings.ReplaceAll(sc.Name, " ", "-")+".png")
		var err error
		var drawn bool
		switch sc.ID {
		case "S0", "S1", "S2":
			drawn, err = rateAndLatencyChart(sc, path)
		case "S3":
			drawn, err = sessionsChart(sc, path)
		case "S4":
			drawn, err = expiryChart(sc, path)
		case "S5":
			drawn, err = churnChart(sc, path)
		case "S6":
			drawn, err = variantsChart(sc, path,
				chartSide{"rss", "S6: server RSS per session", "bytes", "plain"},
				chartSide{"cpu", "S6: server CPU per 1M heartbeats", "CPU-seconds", "plain"})
		case "S7":
			drawn, err = variantsChart(sc, path,
				chartSide{"grant", "S7: server CPU per grant", "µs", "bare"},
				chartSide{"hb", "S7: server CPU per 1M heartbeats", "CPU-seconds", "bare"})
		}
		if err != nil {
			return files, fmt.Errorf("%s: %w", sc.ID, err)
		}
		if drawn {
			files = append(files, path)
		}
	}
	return files, nil
}

func measured(sc *report.Scenario) []*report.Row {
	var rs []*report.Row
	for _, r := range sc.Rows {
		if r.Status == "" {
			rs = append(rs, r)
		}
	}
	return rs
}

// label is a row's x-axis label.
func label(r *report.Row, withFigure bool) string {
	if !withFigure {
		return r.System
	}
	switch r.Key {
	case report.KeyEcho1:
		return "round trip\n1 connection"
	case report.KeyEchoC:
		return "round trips\nC connections"
	case report.KeyCycleC:
		return "connect+request\n+close"
	case report.KeyConnC:
		return "connect+close"
	}
	return r.Figure
}

// rateAndLatencyChart: throughput bars on the left, p50/p99 latency on the right.
func rateAndLatencyChart(sc *report.Scenario, path string) (bool, error) {
	rs := measured(sc)
	if len(rs) == 0 {
		return false, nil
	}
	withFigure := sc.ID == "S0"
	var labels []string
	rate := series{name: "per second"}
	p50 := series{name: "p50"}
	p99 := series{name: "p99"}
	for _, r := range rs {
		labels = append(labels, label(r, withFigure))
		rate.values = append(rate.values, r.Value)
		if r.Lat != nil {
			p50.values = append(p50.values, float64(r.Lat.P50)/1e3)
			p99.values = append(p99.values, float64(r.Lat.P99)/1e3)
		} else {
			p50.values = append(p50.values, 0)
			p99.values = append(p99.values, 0)
		}
	}
	left, err := bars(sc.ID+" "+sc.Name+": throughput", "operations per second (log)", labels, []series{rate}, true)
	if err != nil {
		return false, err
	}
	right, err := bars(sc.ID+" "+sc.Name+": latency", "µs (log)", labels, []series{p50, p99}, true)
	if err != nil {
		return false, err
	}
	return true, saveSideBySide(path, left, right)
}

func sessionsChart(sc *report.Scenario, path string) (bool, error) {
	var rssL, cpuL []string
	rss := series{name: "bytes"}
	cpu := series{name: "CPU-seconds"}
	for _, r := range measured(sc) {
		at := r.Figure[strings.LastIndexByte(r.Figure, '@'):]
		switch {
		case strings.HasPrefix(r.Figure, "RSS"):
			rssL = append(rssL, r.System+"\n"+at)
			rss.values = append(rss.values, r.Value)
		case strings.HasPrefix(r.Figure, "CPU"):
			cpuL = append(cpuL, r.System+"\n"+at)
			cpu.values = append(cpu.values, r.Value)
		}
	}
	if len(rssL) == 0 {
		return false, nil
	}
	left, err := bars("S3: server RSS per session", "bytes", rssL, []series{rss}, false)
	if err != nil {
		return false, err
	}
	right, err := bars("S3: server CPU per 1M heartbeats", "CPU-seconds", cpuL, []series{cpu}, false)
	if err != nil {
		return false, err
	}
	return true, saveSideBySide(path, left, right)
}

// chartSide is one half of a variantsChart: the rows with key, one bar each;
// ref names monolock's own row (the reference configuration) in its label.
type chartSide struct{ key, title, ylabel, ref string }

// variantsChart compares server configurations (S6, S7): one bar per row
// of each side's key, labelled with the row's system.
func variantsChart(sc *report.Scenario, path string, left, right chartSide) (bool, error) {
	side := func(cs chartSide) (*plot.Plot, error) {
		var labels []string
		v := series{name: cs.ylabel}
		for _, r := range measured(sc) {
			if r.Key == cs.key {
				l := strings.Replace(r.System, " ", "\n", 1)
				if r.System == report.SysMonolock {
					l += "\n" + cs.ref
				}
				labels = append(labels, l)
				v.values = append(v.values, r.Value)
			}
		}
		if len(labels) == 0 {
			return nil, nil
		}
		return bars(cs.title, cs.ylabel, labels, []series{v}, false)
	}
	l, err := side(left)
	if err != nil || l == nil {
		return false, err
	}
	r, err := side(right)
	if err != nil || r == nil {
		return false, err
	}
	return true, saveSideBySide(path, l, r)
}

func expiryChart(sc *report.Scenario, path string) (bool, error) {
	var leases []string
	bySys := map[string]map[string]float64{}
	var systems []string
	for _, r := range measured(sc) {
		lease := strings.TrimPrefix(r.Figure, "overshoot, lease ")
		if !contains(leases, lease) {
			leases = append(leases, lease)
		}
		if bySys[r.System] == nil {
			bySys[r.System] = map[string]float64{}
			systems = append(systems, r.System)
		}
		bySys[r.System][lease] = r.Value
	}
	if len(leases) == 0 {
		return false, nil
	}
	var ss []series
	for _, s := range systems {
		v := make([]float64, len(leases))
		for i, l := range leases {
			v[i] = bySys[s][l]
		}
		ss = append(ss, series{name: s, values: v})
	}
	p, err := bars("S4: expiry overshoot (median) by lease", "ms after the lease (log)", leases, ss, true)
	if err != nil {
		return false, err
	}
	return true, p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

func churnChart(sc *report.Scenario, path string) (bool, error) {
	var wall, cpu, floor plotter.XYs
	for _, r := range measured(sc) {
		i := strings.Index(r.Figure, "W=")
		if i < 0 {
			continue
		}
		var w float64
		if _, err := fmt.Sscan(strings.ReplaceAll(r.Figure[i+2:], ",", ""), &w); err != nil {
			continue
		}
		if r.System != report.SysMonolock {
			floor = append(floor, plotter.XY{X: w, Y: r.Value})
		} else if strings.HasPrefix(r.Figure, "server CPU") {
			cpu = append(cpu, plotter.XY{X: w, Y: r.Value})
		} else {
			wall = append(wall, plotter.XY{X: w, Y: r.Value})
		}
	}
	if len(wall) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "S5: cost per departure as the queue grows"
	p.X.Label.Text = "waiters W"
	p.Y.Label.Text = "µs per departure"
	p.Y.Min = 0
	if err := plotutil.AddLinePoints(p, "monolock: wall time", wall, "monolock: server CPU", cpu); err != nil {
		return false, err
	}
	if len(floor) > 0 {
		if err := plotutil.AddScatters(p, "bare gnet: server CPU per close", floor); err != nil {
			return false, err
		}
	}
	p.Legend.Top = true
	p.Y.Max *= 1.3
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ts := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = report.GroupThousands(int64(ts[i].Value))
			}
		}
		return ts
	})
	return true, p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// bars draws grouped bars, one group per label. On a log axis the bars show
// log10 of the values above a base a decade under the smallest one (a bar
// chart cannot start at zero on a log scale), labelled in the real values.
func bars(title, ylabel string, labels []string, ss []series, logY bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	width := vg.Points(math.Max(4, 48/float64(len(ss)*max(1, len(labels)/3))))
	lo := math.Inf(1)
	for _, s := range ss {
		for _, x := range s.values {
			if x > 0 {
				lo = math.Min(lo, x)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo = 1
	}
	shift := math.Floor(math.Log10(lo))
	for i, s := range ss {
		v := make(plotter.Values, len(s.values))
		for j, x := range s.values {
			if logY {
				if x > 0 {
					x = math.Log10(x) - shift + 0.05
				} else {
					x = 0
				}
			}
			v[j] = x
		}
		b, err := plotter.NewBarChart(v, width)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = vg.Length(0)
		b.Color = plotutil.Color(i)
		b.Offset = width * vg.Length(float64(i)-float64(len(ss)-1)/2)
		p.Add(b)
		if len(ss) > 1 {
			p.Legend.Add(s.name, b)
		}
	}
	p.Legend.Top = true
	p.NominalX(labels...)
	p.Y.Min = 0
	if len(ss) > 1 { // room above the bars for the legend
		if logY {
			p.Y.Max += 0.7
		} else {
			p.Y.Max *= 1.3
		}
	}
	if logY {
		p.Y.Tick.Marker = decadeTicks{shift: shift}
	}
	return p, nil
}

// decadeTicks labels a log10 axis shifted by shift decades.
type decadeTicks struct{ shift float64 }

func (t decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := math.Ceil(lo); k <= math.Floor(hi); k++ {
		ts = append(ts, plot.Tick{Value: k, Label: compactNumber(math.Pow(10, k+t.shift))})
	}
	return ts
}

// compactNumber renders a power of ten briefly: 0.01, 1, 100, 10k, 1M.
func compactNumber(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// saveSideBySide writes two plots next to each other into one PNG.
func saveSideBySide(path string, left, right *plot.Plot) error {
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	cs := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(cs[0][0])
	right.Draw(cs[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
