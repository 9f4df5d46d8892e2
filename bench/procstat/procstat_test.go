package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := []byte("4242 (mono lock) S 1 4242 4242 0 -1 4194560 1000 0 0 0 123 45 0 0 20 0 6 0 100 1000000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")
	u, s, err := parseStat(line)
	if err != nil || u != 123 || s != 45 {
		t.Fatalf("parseStat = %d %d %v, want 123 45", u, s, err)
	}
	if p, pp, err := parsePids(line); err != nil || p != 4242 || pp != 1 {
		t.Fatalf("parsePids = %d %d %v", p, pp, err)
	}
	if cu, cs, err := parseStatChildren(line); err != nil || cu != 0 || cs != 0 {
		t.Fatalf("parseStatChildren = %d %d %v", cu, cs, err)
	}
	if _, _, err := parseStat([]byte("garbage")); err == nil {
		t.Fatal("want an error")
	}
}

func TestParseStatus(t *testing.T) {
	st := []byte("Name:\tmonolock\nVmRSS:\t   24800 kB\nRssAnon:\t   15100 kB\nThreads:\t7\n")
	rss, anon, th := parseStatus(st)
	if rss != 24800*1024 || anon != 15100*1024 || th != 7 {
		t.Fatalf("parseStatus = %d %d %d", rss, anon, th)
	}
}

func TestParseSchedstat(t *testing.T) {
	if ns, err := parseSchedstat([]byte("8991 689168 2\n")); err != nil || ns != 8991 {
		t.Fatalf("parseSchedstat = %d %v", ns, err)
	}
}

func TestParseMachineCPU(t *testing.T) {
	m, err := parseMachineCPU("cpu  100 2 30 400 5 6 7 8 0 0", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Busy != 132 || m.Steal != 8 || m.Total != 558 {
		t.Fatalf("busy %d steal %d total %d", m.Busy, m.Steal, m.Total)
	}
	if _, err := parseMachineCPU("intr 1 2 3", time.Time{}); err == nil {
		t.Fatal("want an error")
	}
}

func TestCPUDelta(t *testing.T) {
	a := Sample{UTime: 10, STime: 5, SchedNS: 1_000_000, Threads: 3}
	b := Sample{UTime: 20, STime: 5, SchedNS: 51_000_000, Threads: 3}
	if d := CPUDelta(a, b); d != 50*time.Millisecond {
		t.Fatalf("schedstat delta = %v", d)
	}
	b.Threads = 2 // a thread exited: its schedstat is gone, use the ticks
	if d := CPUDelta(a, b); d != 100*time.Millisecond {
		t.Fatalf("tick delta = %v", d)
	}
}

func TestReadFamilySelf(t *testing.T) {
	s, err := ReadFamily(os.Getpid())
	if err != nil || s.Threads < 1 {
		t.Fatalf("ReadFamily(self) = %+v, %v", s, err)
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.Threads <= 0 {
		t.Fatalf("self sample %+v", s)
	}
}
