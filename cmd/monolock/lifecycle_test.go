package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// transcript prints a step as "event -> phase: actions (note)".
func transcript(ev event, m *lifecycle, a actions) string {
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
				got = append(got, transcript(ev, m, m.step(ev)))
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

// TestSupervise drives the real daemon's supervisor with signals on fake
// channels: with the reload channel kept full throughout, a first SIGTERM
// starts the shutdown delay, a second ends it, and the stop sequence runs to
// exit status 0; the log tells the steps in that order.
func TestSupervise(t *testing.T) {
	var logs syncBuffer
	cfg, err := parseSettings([]string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-shutdown-delay", "1h"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(&logs)
	d, err := start(cfg, log, files{})
	if err != nil {
		t.Fatal(err)
	}
	term := make(chan os.Signal, 2)
	hup := make(chan os.Signal, 1)
	exited := make(chan int, 1)
	go func() { exited <- d.supervise(signals{terminate: term, reload: hup}) }()
	storm := make(chan struct{})
	go func() {
		for {
			select {
			case <-storm:
				return
			case hup <- syscall.SIGHUP:
			}
		}
	}()
	defer close(storm)
	term <- syscall.SIGTERM
	term <- syscall.SIGTERM
	select {
	case status := <-exited:
		if status != 0 {
			t.Fatalf("status %d, want 0; log:\n%s", status, logs.String())
		}
	case <-time.After(safety):
		t.Fatalf("the supervisor did not return; log:\n%s", logs.String())
	}
	out := logs.String()
	at := 0
	for _, step := range []string{"monolock started", "readiness is 503", "second signal: shutdown delay ended early", "monolock stopped"} {
		i := strings.Index(out[at:], step)
		if i < 0 {
			t.Fatalf("log lacks %q after offset %d:\n%s", step, at, out)
		}
		at += i
	}
}

// TestStuckReloadDoesNotDelayShutdown drives the supervisor with fakes: a
// reload that never returns (a file on a hung mount) runs, a SIGTERM comes,
// and the stop sequence runs and the supervisor returns its status while the
// reload is still stuck. SIGHUPs meanwhile coalesce: no second reload starts
// while the first runs, and one line (not one per SIGHUP) says why.
func TestStuckReloadDoesNotDelayShutdown(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	defer close(release)
	stopped := make(chan struct{})
	failed := make(chan error)
	var logs syncBuffer
	s := supervisor{
		log:    zerolog.New(&logs),
		failed: failed,
		reload: func() {
			entered <- struct{}{}
			<-release
		},
		drain: func() {},
		stop: func(context.Context) int {
			close(stopped)
			return 7
		},
	}
	term := make(chan os.Signal, 2)
	hup := make(chan os.Signal, 1)
	exited := make(chan int, 1)
	go func() { exited <- s.run(signals{terminate: term, reload: hup}) }()
	hup <- syscall.SIGHUP
	select {
	case <-entered:
	case <-time.After(safety):
		t.Fatal("SIGHUP did not start a reload")
	}
	// More SIGHUPs while the reload is stuck: each is taken by the
	// supervisor (the channel has room for one), none starts a reload.
	for i := range 5 {
		select {
		case hup <- syscall.SIGHUP:
		case <-time.After(safety):
			t.Fatalf("SIGHUP %d after a stuck reload was never taken: the supervisor waits for the reload", i+2)
		}
	}
	term <- syscall.SIGTERM
	select {
	case status := <-exited:
		if status != 7 {
			t.Fatalf("status %d, want the stop sequence's 7", status)
		}
	case <-time.After(safety):
		t.Fatal("SIGTERM with a reload stuck: the supervisor did not return")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the supervisor returned without running the stop sequence")
	}
	select {
	case <-entered:
		t.Fatal("a second reload started while the first was stuck")
	default:
	}
	if n := strings.Count(logs.String(), "SIGHUP while the previous reload still runs"); n != 1 {
		t.Errorf("%d lines about SIGHUPs during the stuck reload, want 1:\n%s", n, logs.String())
	}
}
