package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RenderScenario formats one scenario as a plain-text table with its notes.
func RenderScenario(sc *Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s — %s\n", sc.ID, sc.Name, sc.Desc)
	headers := []string{"system", "figure", "value", "p50", "p90", "p99", "max", "×monolock", "×floor", "note"}
	right := []bool{false, false, true, true, true, true, true, true, true, false}
	rows := make([][]string, 0, len(sc.Rows))
	for _, r := range sc.Rows {
		rows = append(rows, rowCells(r))
	}
	b.WriteString(FormatTable(headers, rows, right))
	for _, n := range sc.Notes {
		fmt.Fprintf(&b, "  · %s\n", n)
	}
	return b.String()
}

func rowCells(r *Row) []string {
	cells := make([]string, 10)
	cells[0], cells[1] = r.System, r.Figure
	note := r.Note
	if r.Status != "" {
		cells[2] = r.Status
		for i := 3; i < 9; i++ {
			cells[i] = "–"
		}
		cells[9] = note
		return cells
	}
	cells[2] = FormatValue(r.Value, r.Unit)
	if r.Lat != nil && r.Lat.N > 0 {
		cells[3] = FormatDuration(r.Lat.P50)
		cells[4] = FormatDuration(r.Lat.P90)
		cells[5] = FormatDuration(r.Lat.P99)
		cells[6] = FormatDuration(r.Lat.Max)
	} else {
		cells[3], cells[4], cells[5], cells[6] = "–", "–", "–", "–"
	}
	cells[7], cells[8] = "–", "–"
	if r.VsMonolock != nil {
		cells[7] = FormatRatio(*r.VsMonolock)
	}
	if r.VsFloor != nil {
		cells[8] = FormatRatio(*r.VsFloor)
	}
	cells[9] = note
	return cells
}

// FormatTable aligns cells in columns two spaces apart; right marks columns
// aligned to the right. Trailing blanks are trimmed.
func FormatTable(headers []string, rows [][]string, right []bool) string {
	width := make([]int, len(headers))
	for i, h := range headers {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		var l strings.Builder
		for i := range headers {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				l.WriteString("  ")
			}
			if i < len(right) && right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(headers)
	rule := make([]string, len(headers))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	line(rule)
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// FormatValue renders a figure with its unit: counts with thousands
// separators, small values with three significant digits.
func FormatValue(v float64, unit string) string {
	var s string
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		s = "n/a"
	case math.Abs(v) >= 1000:
		s = GroupThousands(int64(math.Round(v)))
	case v == math.Trunc(v):
		s = strconv.FormatInt(int64(v), 10)
	default:
		s = Sig3(v)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// Sig3 formats v (|v| < 1000) with three significant digits.
func Sig3(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(a))), 64)
}

func GroupThousands(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 && !(neg && b.Len() == 1) {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// FormatDuration renders nanoseconds with three significant digits in the
// largest unit that keeps the number ≥ 1.
func FormatDuration(ns int64) string {
	d := float64(ns)
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d < 1e3:
		return neg + strconv.FormatInt(int64(d), 10) + "ns"
	case d < 1e6:
		return neg + Sig3(d/1e3) + "µs"
	case d < 1e9:
		return neg + Sig3(d/1e6) + "ms"
	}
	return neg + Sig3(d/1e9) + "s"
}

// FormatRatio renders a ratio such as 0.42× or 17.3×.
func FormatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	if r >= 1000 {
		return GroupThousands(int64(math.Round(r))) + "×"
	}
	return Sig3(r) + "×"
}

// DurMS renders a duration for notes, e.g. "1.5s" or "250ms".
func DurMS(d time.Duration) string { return FormatDuration(int64(d)) }
