package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/audit"
)

// signals are the channels the process's signals arrive on: one for
// termination and one for reloads, so that however many SIGHUPs arrive,
// none takes a SIGTERM's place (package signal drops a signal whose channel
// is full).
type signals struct {
	// terminate holds SIGTERM and SIGINT: room for the first (stop) and the
	// second (hurry) while the supervisor is busy with another event.
	terminate <-chan os.Signal
	// reload holds SIGHUP; one pending reload stands for any number, since
	// it rereads every file after they all arrived.
	reload <-chan os.Signal
}

// notifySignals routes the process's signals to new channels for good:
// nothing stops the routing, so a SIGHUP that arrives while the process
// exits is still caught, never its default action (an exit with status 129
// that a supervisor would take for a crash).
func notifySignals() signals {
	terminate := make(chan os.Signal, 2)
	reload := make(chan os.Signal, 1)
	signal.Notify(terminate, syscall.SIGTERM, syscall.SIGINT)
	signal.Notify(reload, syscall.SIGHUP)
	return signals{terminate: terminate, reload: reload}
}

// supervise runs the daemon's lifecycle (lifecycle.go) until it exits and
// returns the process's exit status.
func (d *daemon) supervise(sig signals) int {
	return supervisor{
		delay:  d.cfg.shutdownDelay,
		log:    d.log,
		failed: d.failed,
		reload: d.reload,
		drain:  d.health.Drain,
		stop:   d.stop,
	}.run(sig)
}

// supervisor turns the lifecycle's actions into effects. The effects are
// functions so that the tests can drive it with fakes: a reload that never
// returns, a stop sequence that reports at once.
type supervisor struct {
	delay  time.Duration
	log    zerolog.Logger
	failed <-chan error
	// reload rereads the files; it runs on a goroutine of its own (reloads),
	// never on the one that waits for SIGTERM, because a file on a hung mount
	// can block it for as long as the mount hangs.
	reload func()
	drain  func()
	stop   func(ctx context.Context) int
}

func (s supervisor) run(sig signals) int {
	m := newLifecycle(s.delay)
	var (
		delay   <-chan time.Time // the shutdown delay's timer, once armed
		stopped chan int         // the stop sequence's status, once begun
	)
	// Cancelling hurried cuts the stop sequence short.
	hurried, hurry := context.WithCancel(context.Background())
	defer hurry()
	reloads := startReloads(s.reload)
	defer reloads.close()
	for {
		ev := nextEvent(sig, delay, s.failed, stopped)
		a := m.step(ev)
		if a.reload {
			if since, first := reloads.request(); first {
				s.log.Warn().Dur("running_for", time.Since(since)).
					Msg("SIGHUP while the previous reload still runs: one more reload follows when it ends; if this lasts, a file it reads is on a hung mount (the reload's own line names the file when it ends); SIGTERM is not held up")
			}
		}
		if a.drain {
			s.drain()
		}
		if a.armDelay {
			t := time.NewTimer(s.delay)
			defer t.Stop()
			delay = t.C
		}
		// The note follows the drain (a reader of "readiness is 503" finds it
		// so) and precedes the stop sequence's own lines.
		if a.note != "" {
			s.log.WithLevel(a.level).Err(ev.err).Msg(a.note)
		}
		if a.stop {
			stopped = make(chan int, 1)
			go func() {
				ctx, cancel := context.WithTimeout(hurried, shutdownGrace)
				defer cancel()
				stopped <- s.stop(ctx)
			}()
		}
		if a.hurry {
			hurry()
		}
		if a.exit {
			return a.status
		}
	}
}

// reloads runs reloads one at a time on a goroutine of its own. Its mailbox
// holds one request: a SIGHUP that arrives while a reload runs leaves one
// more to run after it (the files may have changed since that one read
// them), and any number of SIGHUPs meanwhile coalesce into that one. The
// supervisor never waits for a reload, so a reload stuck in an open on a hung
// mount delays no SIGTERM; the stuck goroutine ends with the process.
type reloads struct {
	pending chan struct{} // cap 1: a reload is asked for
	done    chan struct{} // closed when the supervisor returns

	mu      sync.Mutex
	running time.Time // when the reload in progress began; zero when none runs
	told    bool      // a request during this reload was reported
}

func startReloads(reload func()) *reloads {
	r := &reloads{pending: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		for {
			select {
			case <-r.pending:
				r.mark(time.Now())
				reload()
				r.mark(time.Time{})
			case <-r.done:
				return
			}
		}
	}()
	return r
}

func (r *reloads) mark(began time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running, r.told = began, false
}

// request asks for a reload without waiting: when one is already pending,
// this one is the same. first is true for the first request made while a
// reload runs, with when that reload began, so that the supervisor says once
// per reload why this SIGHUP's reload waits.
func (r *reloads) request() (since time.Time, first bool) {
	select {
	case r.pending <- struct{}{}:
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running.IsZero() || r.told {
		return time.Time{}, false
	}
	r.told = true
	return r.running, true
}

// close lets the goroutine end once no reload runs.
func (r *reloads) close() { close(r.done) }

// nextEvent waits for the next event. A pending termination comes first,
// whatever else is pending: a storm of reloads cannot delay it (and a reload
// in progress cannot either: it runs on the reloads goroutine).
func nextEvent(sig signals, delay <-chan time.Time, failed <-chan error, stopped <-chan int) event {
	select {
	case <-sig.terminate:
		return event{kind: evTerminate}
	default:
	}
	select {
	case <-sig.terminate:
		return event{kind: evTerminate}
	case <-sig.reload:
		return event{kind: evReload}
	case <-delay:
		return event{kind: evDelayOver}
	case err := <-failed:
		return event{kind: evFailed, err: err}
	case status := <-stopped:
		return event{kind: evStopDone, status: status}
	}
}

// stop is the documented stop sequence after the drain: the protocol side
// stops accepting and closes every session with ERROR 0x01, then the HTTP
// sides stop (the ops port last, so that a probe sees 503 to the end) and
// the audit stream is flushed. ctx bounds it all; the status is 1 when a
// part did not finish cleanly.
func (d *daemon) stop(ctx context.Context) int {
	status := 0
	if err := d.srv.Shutdown(ctx); err != nil {
		d.log.Error().Err(err).Msg("protocol shutdown did not finish")
		status = 1
	}
	d.stopHA(ctx) // after the lock port stopped granting
	for _, hs := range []*http.Server{d.admin, d.ops} {
		if hs != nil {
			if err := hs.Shutdown(ctx); err != nil {
				_ = hs.Close()
			}
		}
	}
	if d.audit != nil {
		if err := closeAudit(ctx, d.audit); err != nil {
			d.log.Error().Err(err).Msg("closing the audit log")
			status = 1
		}
	}
	d.log.Info().Msg("monolock stopped")
	return status
}

// closeAudit flushes and closes the audit log, but waits no longer than
// ctx: a destination that hangs must not keep the process from exiting.
func closeAudit(ctx context.Context, l *audit.Log) error {
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		return err
	case <-ctx.Done():
		return fmt.Errorf("the audit log did not flush within the shutdown grace; up to %d bytes of events are lost: %w", l.PendingBytes(), ctx.Err())
	}
}
