package gocronlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/monolock/monolock/client"
)

// tick is when the examples' run is due: 22:00:01 UTC.
var tick = time.Date(2026, 12, 6, 22, 0, 1, 0, time.UTC)

// safety bounds the wait for a goroutine's doing; never a timing assertion.
const safety = 10 * time.Second

// scheduler is one scheduler of a fleet: its locker and its clock.
type scheduler struct {
	l     *locker
	clock *clockwork.FakeClock
}

func newScheduler(srv *fakeServer, at time.Time, opts ...Option) scheduler {
	clock := clockwork.NewFakeClockAt(at)
	cfg := newConfig(append(opts, func(c *config) { c.clock = clock }))
	return scheduler{newLocker(srv, cfg), clock}
}

// run is one run of job on s: Lock, the job (Held), Unlock.
func (s scheduler) run(t *testing.T, job string) (Hold, error) {
	t.Helper()
	lk, err := s.l.Lock(context.Background(), job)
	if err != nil {
		return Hold{}, err
	}
	h := Held(s.l, job)
	if err := lk.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	return h, nil
}

// awaitClosed waits until the holder of a lock has closed it.
func awaitClosed(t *testing.T, l *fakeLock) {
	t.Helper()
	select {
	case <-l.lost:
	case <-time.After(safety):
		t.Fatalf("lock %q was not released", l.name)
	}
	if !l.closed.Load() {
		t.Fatalf("lock %q ended without Close: %v", l.name, l.err)
	}
}

func TestLockerTakesOneLockPerScheduledRun(t *testing.T) {
	srv := newFakeServer()
	a := newScheduler(srv, tick.Add(300*time.Millisecond), WithLease(2*time.Second))
	lk, err := a.l.Lock(context.Background(), "report")
	if err != nil {
		t.Fatal(err)
	}
	const want = "gocron/report@2026-12-06T22:00:01Z"
	h := Held(a.l, "report")
	if h.LockName() != want || !h.Slot().Equal(tick) || h.Token() == 0 || !h.Valid() {
		t.Fatalf("Held = %q slot %v token %d valid %v, want %q slot %v, a token, valid", h.LockName(), h.Slot(), h.Token(), h.Valid(), want, tick)
	}
	if c := srv.calls[0]; c.name != want || !c.hasDeadline || srv.leases[0] != 2*time.Second {
		t.Fatalf("TryAcquire(%q, deadline %v, lease %v), want %q with a deadline and the 2s lease", c.name, c.hasDeadline, srv.leases[0], want)
	}
	if got := Held(a.l, "other"); got.Valid() || got.Token() != 0 {
		t.Fatalf("Held of a job not running = %+v, want the zero Hold", got)
	}
	if err := lk.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := Held(a.l, "report"); got.Valid() {
		t.Fatal("Held after Unlock is still valid: the run has ended")
	}
}

// A scheduler whose tick comes late, after another ran the run and called
// Unlock, finds the run's lock held and skips it, as long as it comes within
// the hold: two slots from the run's slot.
func TestLockerLateSchedulerSkipsARunAnotherRan(t *testing.T) {
	srv := newFakeServer()
	a := newScheduler(srv, tick.Add(5*time.Millisecond))
	h, err := a.run(t, "report")
	if err != nil {
		t.Fatal(err)
	}
	first := srv.held(h.LockName())
	// b's clock lags by 300ms and its timer fired 600ms late: it comes to
	// the run at 22:00:01.9 by its clock, 22:00:02.2 by a's.
	b := newScheduler(srv, tick.Add(900*time.Millisecond))
	a.clock.Advance(1195 * time.Millisecond) // a: 22:00:02.2
	if _, err := b.run(t, "report"); !errors.Is(err, ErrRunTaken) || !strings.Contains(err.Error(), h.LockName()) {
		t.Fatalf("late scheduler's Lock = %v, want ErrRunTaken naming %q", err, h.LockName())
	}
	if first.closed.Load() {
		t.Fatal("the run's lock was released before its hold ended")
	}
	// The hold ends two slots after the run's slot began, by a's clock.
	a.clock.Advance(799 * time.Millisecond) // a: 22:00:02.999
	if first.closed.Load() {
		t.Fatal("the run's lock was released before 22:00:03")
	}
	a.clock.Advance(time.Millisecond)
	awaitClosed(t, first)
}

// The hold of one run never delays the next: its lock has another name.
func TestLockerHoldDoesNotDelayTheNextRun(t *testing.T) {
	srv := newFakeServer()
	a := newScheduler(srv, tick)
	b := newScheduler(srv, tick.Add(time.Second))
	ha, err := a.run(t, "report")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.run(t, "report")
	if err != nil {
		t.Fatalf("the next run while the previous one's lock is held: %v", err)
	}
	if hb.LockName() != "gocron/report@2026-12-06T22:00:02Z" || srv.held(ha.LockName()) == nil {
		t.Fatalf("next run took %q (previous held: %v), want the 22:00:02 run's own lock", hb.LockName(), srv.held(ha.LockName()) != nil)
	}
	if hb.Token() <= ha.Token() {
		t.Fatalf("the later run's token %d is not above the earlier's %d: fencing on the job's name would refuse it", hb.Token(), ha.Token())
	}
}

// A run that lasted past its hold releases at Unlock.
func TestLockerLongRunReleasesAtUnlock(t *testing.T) {
	srv := newFakeServer()
	a := newScheduler(srv, tick)
	lk, err := a.l.Lock(context.Background(), "report")
	if err != nil {
		t.Fatal(err)
	}
	held := srv.held(Held(a.l, "report").LockName())
	a.clock.Advance(2 * time.Second)
	if err := lk.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !held.closed.Load() {
		t.Fatal("Unlock after the hold's end did not release at once")
	}
}

// The slot is the schedule's resolution: with minutes, a scheduler 40s late
// still finds the minute's run taken, and the run's lock is held until two
// minutes after the slot began.
func TestLockerSlotOption(t *testing.T) {
	srv := newFakeServer()
	at := time.Date(2026, 12, 6, 9, 0, 0, 200e6, time.UTC)
	a := newScheduler(srv, at, WithSlot(time.Minute), WithPrefix("nightly:"))
	h, err := a.run(t, "import")
	if err != nil {
		t.Fatal(err)
	}
	if h.LockName() != "nightly:import@2026-12-06T09:00:00Z" {
		t.Fatalf("lock name %q", h.LockName())
	}
	first := srv.held(h.LockName())
	b := newScheduler(srv, at.Add(40*time.Second), WithSlot(time.Minute), WithPrefix("nightly:"))
	if _, err := b.run(t, "import"); !errors.Is(err, ErrRunTaken) {
		t.Fatalf("40s late with a one-minute slot: %v, want ErrRunTaken", err)
	}
	a.clock.Advance(2*time.Minute - 200*time.Millisecond)
	awaitClosed(t, first)
}

// A failed attempt is the job's skip, with the lock's name and the cause.
func TestLockerAttemptFailureSaysWhich(t *testing.T) {
	srv := newFakeServer()
	srv.fail = client.ErrConnectionClosed
	a := newScheduler(srv, tick)
	_, err := a.l.Lock(context.Background(), "report")
	if !errors.Is(err, client.ErrConnectionClosed) || errors.Is(err, ErrRunTaken) || !strings.Contains(err.Error(), `"gocron/report@2026-12-06T22:00:01Z"`) {
		t.Fatalf("Lock = %v, want the cause, naming the lock", err)
	}
}

func TestHeldOfAnotherLocker(t *testing.T) {
	if h := Held(nil, "report"); h.Valid() || h.Token() != 0 || h.LockName() != "" {
		t.Fatalf("Held(nil) = %+v", h)
	}
}
