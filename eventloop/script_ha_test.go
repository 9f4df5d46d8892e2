package eventloop

import (
	"fmt"
	"strconv"
	"time"
)

// The commands of the HA rule scripts (testdata/rules/ha.txt): the etcd
// side's events, each through the Server's HA method as package haetcd
// calls it (a call into the loop, times as the process's clock), and the
// script itself playing the etcd side's HACoordinator, so that what the
// loop asks of etcd is printed where it happens ("etcd ← ...").

// runHA runs an HA command; ok is false for a command it does not know.
func (sc *script) runHA(cmd string, a []string) (out string, ok bool) {
	term := uint64(sc.num(sc.kv(a, "term", "1")))
	switch cmd {
	case "elected":
		won := sc.instant(sc.kv(a, "won", ""))
		sent := sc.instant(sc.kv(a, "sent", ""))
		maxLease := uint32(sc.dur(sc.kv(a, "max-lease", "0s")) / time.Millisecond)
		credit := uint32(sc.dur(sc.kv(a, "credit", "0s")) / time.Millisecond)
		sc.haCall(func() error { return sc.r.srv.HAElected(sc.t.Context(), term, won, sent, maxLease, credit) })
	case "keepalive":
		sent := sc.instant(sc.kv(a, "sent", ""))
		sc.haCall(func() error { return sc.r.srv.HAKeepalive(sc.t.Context(), term, sent) })
	case "block":
		lo, hi := sc.token(sc.kv(a, "lo", "")), sc.token(sc.kv(a, "hi", ""))
		sc.haCall(func() error { return sc.r.srv.HATokenBlock(sc.t.Context(), term, lo, hi) })
	case "max-lease":
		ms := uint32(sc.dur(sc.kv(a, "lease", "0s")) / time.Millisecond)
		sc.haCall(func() error { return sc.r.srv.HAMaxLease(sc.t.Context(), term, ms) })
	case "lost":
		why := sc.kv(a, "why", "etcd says so")
		sc.haCall(func() error { return sc.r.srv.HALost(sc.t.Context(), term, why) })
	case "pause":
		sc.r.pause(sc.dur(sc.arg(a, 0)))
	case "ha":
		return sc.haState(), true
	default:
		return "", false
	}
	return "", true
}

// haCall runs one of the Server's HA methods while the script serves the
// loop.
func (sc *script) haCall(fn func() error) {
	if err := sc.r.call(fn, nil); err != nil {
		sc.fatalf("%v", err)
	}
}

// instant is a time since the case began (now when empty) as the etcd side
// would read it: the process's clock, here the fake wall clock.
func (sc *script) instant(since string) time.Time {
	if since == "" {
		return sc.r.clk.wall
	}
	return sc.r.clk.wall.Add(sc.start + sc.dur(since) - sc.r.now())
}

func (sc *script) token(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		sc.fatalf("token %q: %v", s, err)
	}
	return n
}

// haState describes the loop's term: leading or not, serving, the
// deadline and the end of the new leader's wait, max-lease, the claims
// waiting for a token.
func (sc *script) haState() string {
	h := &sc.r.o.ha
	if !h.leading {
		return fmt.Sprintf("following (last term %d, %d won)", h.term, h.status.terms.Load())
	}
	serving := "waiting until " + sc.since(h.openAt).String()
	if h.serving {
		serving = "serving"
	}
	return fmt.Sprintf("leading term %d, %s, deadline %v, max-lease %dms, pending %d", h.term, serving, sc.since(h.deadline), h.maxLease, sc.r.o.table.Pending())
}

// The script is the loop's HACoordinator: it prints what the loop asks.

func (sc *script) NeedTokenBlock(term uint64) {
	sc.logNow(fmt.Sprintf("etcd ← reserve a token block (term %d)", term))
}

func (sc *script) NeedMaxLease(term uint64, ms uint32) {
	sc.logNow(fmt.Sprintf("etcd ← store max-lease %dms (term %d)", ms, term))
}

func (sc *script) TermEnded(term uint64, why string) {
	sc.logNow(fmt.Sprintf("etcd ← term %d ended: %s", term, why))
}

// listener hears the loop open or close the lock listener.
func (sc *script) listener(open bool) {
	if open {
		sc.logNow("lock listener opens")
		return
	}
	sc.logNow("lock listener closes")
}

// logNow records a line stamped with the turn's time.
func (sc *script) logNow(line string) {
	sc.log = append(sc.log, sc.since(offsetNow(sc.r.o)).String()+" "+line)
}
