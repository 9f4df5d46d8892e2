package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/audit"
)

// signals are the channels the process's signals arrive on: one for
// termination and one for reloads, so that however many SIGHUPs arrive,
// none takes a SIGTERM's place (package signal drops a signal whose channel
// is full).
type signals struct {
	// terminate holds SIGTERM and SIGINT: room for the first (stop) and the
	// second (hurry) while the supervisor is busy with a reload.
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
	m := newLifecycle(d.cfg.shutdownDelay)
	var (
		delay   <-chan time.Time // the shutdown delay's timer, once armed
		stopped chan int         // the stop sequence's status, once begun
	)
	// Cancelling hurried cuts the stop sequence short.
	hurried, hurry := context.WithCancel(context.Background())
	defer hurry()
	for {
		ev := nextEvent(sig, delay, d.failed, stopped)
		a := m.step(ev)
		if a.reload {
			d.reload()
		}
		if a.drain {
			d.health.Drain()
		}
		if a.armDelay {
			t := time.NewTimer(d.cfg.shutdownDelay)
			defer t.Stop()
			delay = t.C
		}
		// The note follows the drain (a reader of "readiness is 503" finds it
		// so) and precedes the stop sequence's own lines.
		if a.note != "" {
			d.log.WithLevel(a.level).Err(ev.err).Msg(a.note)
		}
		if a.stop {
			stopped = make(chan int, 1)
			go func() {
				ctx, cancel := context.WithTimeout(hurried, shutdownGrace)
				defer cancel()
				stopped <- d.stop(ctx)
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

// nextEvent waits for the next event. A pending termination comes first,
// whatever else is pending: a storm of reloads cannot delay it by more than
// the reload in progress.
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
