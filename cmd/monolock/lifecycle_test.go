package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// describe prints a step as "event -> phase: actions (note)".
func describe(ev event, m *lifecycle, a actions) string {
	var do []string
	for _, f := range []struct {
		on   bool
		name string
	}{{a.reload, "reload"}, {a.drain, "drain"}, {a.armDelay, "arm-delay"}, {a.stop, "stop"}, {a.hurry, "hurry"}} {
		if f.on {
			do = append(do, f.name)
		}
	}
	if a.exit {
		do = append(do, fmt.Sprintf("exit %d", a.status))
	}
	if len(do) == 0 {
		do = append(do, "-")
	}
	line := fmt.Sprintf("%s -> %s: %s", ev.kind, m.phase, strings.Join(do, " "))
	if a.note != "" {
		line += fmt.Sprintf(" (%s: %s)", a.level, a.note)
	}
	return line
}

// TestLifecycle feeds the state machine events and checks every
// transition: no signal, no clock, no server.
func TestLifecycle(t *testing.T) {
	failed := event{kind: evFailed, err: fmt.Errorf("listener closed")}
	cases := []struct {
		name   string
		delay  time.Duration
		events []event
		want   string
	}{
		{"reloads, then stop without a delay", 0,
			[]event{{kind: evReload}, {kind: evReload}, {kind: evTerminate}, {kind: evReload}, {kind: evDelayOver}, {kind: evFailed}, {kind: evStopDone, status: 0}},
			`reload -> running: reload
reload -> running: reload
terminate -> stopping: drain stop (info: shutting down: every session gets ERROR 0x01)
reload -> stopping: -
delay-over -> stopping: -
failed -> stopping: -
stop-done -> exited: exit 0`},
		{"a stop that did not finish cleanly exits 1", 0,
			[]event{{kind: evTerminate}, {kind: evStopDone, status: 1}},
			`terminate -> stopping: drain stop (info: shutting down: every session gets ERROR 0x01)
stop-done -> exited: exit 1`},
		{"a second and a third signal while stopping hurry once", 0,
			[]event{{kind: evTerminate}, {kind: evTerminate}, {kind: evTerminate}, {kind: evReload}, {kind: evStopDone, status: 0}},
			`terminate -> stopping: drain stop (info: shutting down: every session gets ERROR 0x01)
terminate -> stopping: hurry (warn: another signal: the shutdown is cut short)
terminate -> stopping: -
reload -> stopping: -
stop-done -> exited: exit 0`},
		{"the delay ends by its timer; SIGHUP reloads during it", time.Hour,
			[]event{{kind: evTerminate}, {kind: evReload}, {kind: evDelayOver}, {kind: evReload}, {kind: evStopDone, status: 0}},
			`terminate -> draining: drain arm-delay (info: readiness is 503; serving on for the shutdown delay before sessions get ERROR 0x01)
reload -> draining: reload
delay-over -> stopping: stop (info: shutdown delay over: every session gets ERROR 0x01)
reload -> stopping: -
stop-done -> exited: exit 0`},
		{"a second signal ends the delay, a third hurries", time.Hour,
			[]event{{kind: evTerminate}, {kind: evTerminate}, {kind: evDelayOver}, {kind: evTerminate}, {kind: evStopDone, status: 0}},
			`terminate -> draining: drain arm-delay (info: readiness is 503; serving on for the shutdown delay before sessions get ERROR 0x01)
terminate -> stopping: stop (info: second signal: shutdown delay ended early; every session gets ERROR 0x01)
delay-over -> stopping: -
terminate -> stopping: hurry (warn: another signal: the shutdown is cut short)
stop-done -> exited: exit 0`},
		{"a failure while running exits 1 at once", 0,
			[]event{{kind: evReload}, failed},
			`reload -> running: reload
failed -> exited: exit 1 (error: server stopped unexpectedly)`},
		{"a failure during the delay stops", time.Hour,
			[]event{{kind: evTerminate}, failed, {kind: evStopDone, status: 0}},
			`terminate -> draining: drain arm-delay (info: readiness is 503; serving on for the shutdown delay before sessions get ERROR 0x01)
failed -> stopping: stop (error: a server stopped during the shutdown delay; shutting down now)
stop-done -> exited: exit 0`},
		{"events before any signal that cannot come then change nothing", 0,
			[]event{{kind: evDelayOver}, {kind: evStopDone, status: 1}, {kind: evTerminate}},
			`delay-over -> running: -
stop-done -> running: -
terminate -> stopping: drain stop (info: shutting down: every session gets ERROR 0x01)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newLifecycle(c.delay)
			var got []string
			for _, ev := range c.events {
				got = append(got, describe(ev, m, m.step(ev)))
			}
			if g := strings.Join(got, "\n"); g != c.want {
				t.Errorf("transitions:\n%s\nwant:\n%s", g, c.want)
			}
		})
	}
}

// TestLifecycleNeverExitsOnReloads: however many SIGHUPs come, in any
// phase, none ends the process, and after SIGTERM the status is the stop
// sequence's.
func TestLifecycleNeverExitsOnReloads(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Hour} {
		m := newLifecycle(delay)
		hups := func() {
			for range 1000 {
				if a := m.step(event{kind: evReload}); a.exit || a.stop || a.drain {
					t.Fatalf("SIGHUP in %s: %+v", m.phase, a)
				}
			}
		}
		hups()
		m.step(event{kind: evTerminate})
		hups()
		if m.phase == draining {
			m.step(event{kind: evDelayOver})
			hups()
		}
		if a := m.step(event{kind: evStopDone, status: 0}); !a.exit || a.status != 0 {
			t.Fatalf("delay %v: end of the stop sequence gave %+v, want exit 0", delay, a)
		}
	}
}

// TestNextEventPrefersTermination: with reloads and everything else
// pending, a pending SIGTERM is the next event, every time.
func TestNextEventPrefersTermination(t *testing.T) {
	for range 1000 {
		term := make(chan os.Signal, 2)
		hup := make(chan os.Signal, 1)
		delay := make(chan time.Time, 1)
		failed := make(chan error, 1)
		stopped := make(chan int, 1)
		hup <- syscall.SIGHUP
		delay <- time.Time{}
		failed <- fmt.Errorf("x")
		stopped <- 0
		term <- syscall.SIGTERM
		if ev := nextEvent(signals{terminate: term, reload: hup}, delay, failed, stopped); ev.kind != evTerminate {
			t.Fatalf("next event %s, want terminate", ev.kind)
		}
	}
}
