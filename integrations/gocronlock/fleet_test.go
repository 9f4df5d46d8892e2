package gocronlock_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// The judge of the integration: five schedulers, each its own process
// (internal/scheduler), run a job every second against one monolock server,
// for at least minTicks ticks, while one is killed with SIGKILL and another
// is stopped with SIGSTOP past its lease and then resumed. The cron
// schedule fires on the second in every process, so the ticks align, and
// each "ran" line names its tick. The checks, from those lines: no tick ran
// twice, and every tick ran once but those missed while a frozen holder's
// lease ran out (counted); for the Elector, a process runs ticks only while
// it leads, and another leads after the leader is killed or frozen.

const (
	fleetSize = 5
	minTicks  = 30
	lease     = 2 * time.Second
	// lineWait bounds the wait for one awaited line: a net against a hung
	// test, never a timing assertion (the lines come every second).
	lineWait = 30 * time.Second
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// schedulerBinary builds internal/scheduler, a package of this module
// (proc.Build builds the root module's).
func schedulerBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "scheduler")
	cmd := exec.Command("go", "build", "-o", out, "./internal/scheduler")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/scheduler: %v\n%s", err, b)
	}
	return out
}

func TestFleet(t *testing.T) {
	server := proc.MonolockT(t, proc.MustBinary(t, "./cmd/monolock"))
	bin := schedulerBinary(t)
	t.Run("Locker", func(t *testing.T) {
		t.Parallel()
		judgeLocker(t, startFleet(t, bin, server.Addr, "locker", nil), server.Addr)
	})
	t.Run("Elector", func(t *testing.T) {
		t.Parallel()
		judgeElector(t, func(onEvent func(event)) *fleet { return startFleet(t, bin, server.Addr, "elector", onEvent) })
	})
}

// event is one line of one scheduler.
type event struct {
	id   int
	verb string
	rest []string
	text string
}

// fleet is the five processes and the lines they wrote, merged in the
// order they were read, with what the judge has read so far.
type fleet struct {
	t      *testing.T
	procs  []*proc.Child
	lines  chan event
	ran    map[int64][]int // tick → the schedulers that ran it
	ticks  []int64         // the ticks in the order their first run was read
	frozen map[int]bool
	skips  map[string]map[int]bool // lock name → the schedulers that skipped its run
	// onEvent, when set, sees every line as it is recorded.
	onEvent   func(event)
	forwarded sync.WaitGroup // the goroutines that forward each child's lines
}

// startFleet starts the five schedulers and waits until each is ready;
// onEvent (when not nil) sees every line from the first.
func startFleet(t *testing.T, bin, addr, mode string, onEvent func(event)) *fleet {
	f := &fleet{t: t, lines: make(chan event, 4096), ran: map[int64][]int{}, frozen: map[int]bool{}, skips: map[string]map[int]bool{}, onEvent: onEvent}
	for id := range fleetSize {
		c, err := proc.StartChild(bin, proc.ChildOptions{
			Name: fmt.Sprintf("%s scheduler %d", mode, id),
			Args: []string{"-addr", addr, "-mode", mode, "-lease", lease.String(), "-leader-lock", "judge-" + mode},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		f.procs = append(f.procs, c)
		f.forwarded.Add(1)
		go func() {
			defer f.forwarded.Done()
			for l := range c.Lines() {
				fields := strings.Fields(l.Text)
				if len(fields) == 0 {
					continue
				}
				f.lines <- event{id: id, verb: fields[0], rest: fields[1:], text: l.Text}
			}
		}()
	}
	ready := map[int]bool{}
	f.await("every scheduler ready", func(e event) bool {
		ready[e.id] = ready[e.id] || e.verb == "ready"
		return len(ready) == fleetSize && allTrue(ready)
	})
	return f
}

func allTrue(m map[int]bool) bool {
	for _, v := range m {
		if !v {
			return false
		}
	}
	return true
}

// record notes a line: a run of a tick, a lost run.
func (f *fleet) record(e event) {
	f.t.Helper()
	switch e.verb {
	case "ran":
		tick, err := strconv.ParseInt(e.rest[0], 10, 64)
		if err != nil || len(e.rest) != 3 {
			f.t.Fatalf("scheduler %d: %q: want ran TICK TOKEN LOCK", e.id, e.text)
		}
		if len(f.ran[tick]) == 0 {
			f.ticks = append(f.ticks, tick)
		}
		f.ran[tick] = append(f.ran[tick], e.id)
	case "skip":
		// skip gocronlock: another scheduler has this run: lock "NAME" is held ...
		_, quoted, ok := strings.Cut(e.text, "lock ")
		if q, err := strconv.QuotedPrefix(quoted); ok && err == nil {
			name, _ := strconv.Unquote(q)
			if f.skips[name] == nil {
				f.skips[name] = map[int]bool{}
			}
			f.skips[name][e.id] = true
		}
	case "lost":
		f.t.Logf("scheduler %d: %s", e.id, e.text)
	}
	if f.onEvent != nil {
		f.onEvent(e)
	}
}

// await reads lines, recording each, until done says so.
func (f *fleet) await(what string, done func(event) bool) event {
	f.t.Helper()
	timer := time.NewTimer(lineWait)
	defer timer.Stop()
	for {
		select {
		case e := <-f.lines:
			f.record(e)
			if done(e) {
				return e
			}
		case <-timer.C:
			f.t.Fatalf("waiting for %s: not within %v (ticks run so far: %d)", what, lineWait, len(f.ticks))
		}
	}
}

// awaitTicks reads until n more ticks have run.
func (f *fleet) awaitTicks(n int) {
	f.t.Helper()
	want := len(f.ticks) + n
	f.await(fmt.Sprintf("%d ticks", want), func(event) bool { return len(f.ticks) >= want })
}

// live are the schedulers not killed.
func (f *fleet) live() []int {
	var ids []int
	for id, c := range f.procs {
		select {
		case <-c.Done():
		default:
			ids = append(ids, id)
		}
	}
	return ids
}

func (f *fleet) signal(id int, sig syscall.Signal) {
	f.t.Helper()
	if err := syscall.Kill(f.procs[id].Pid(), sig); err != nil {
		f.t.Fatalf("%v to scheduler %d: %v", sig, id, err)
	}
}

// kill ends scheduler id with SIGKILL and waits for its exit; the lines it
// wrote before are still read.
func (f *fleet) kill(id int) {
	f.t.Helper()
	f.signal(id, syscall.SIGKILL)
	if !f.procs[id].WaitExit(lineWait) {
		f.t.Fatalf("scheduler %d did not exit within %v of SIGKILL", id, lineWait)
	}
}

// stop ends every scheduler still running by closing its stdin, and records
// every line they wrote.
func (f *fleet) stop() {
	f.t.Helper()
	for _, id := range f.live() {
		if err := f.procs[id].Close(lineWait); err != nil {
			f.t.Errorf("scheduler %d: %v: %s", id, err, f.procs[id].Stderr())
		}
	}
	done := make(chan struct{})
	go func() { f.forwarded.Wait(); close(done) }()
	for {
		select {
		case e := <-f.lines:
			f.record(e)
		case <-done:
			for {
				select {
				case e := <-f.lines:
					f.record(e)
				default:
					return
				}
			}
		case <-time.After(lineWait):
			f.t.Fatalf("the schedulers' output did not end within %v of their exits", lineWait)
		}
	}
}

// tally checks the runs: no tick ran twice; every tick from the first to the
// last ran, except those in the excused ranges. It returns the count of
// ticks, of ticks run once and of ticks missed in each excused range.
func (f *fleet) tally(excused ...[2]int64) (ticks, once int, missed []int) {
	f.t.Helper()
	all := append([]int64(nil), f.ticks...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	missed = make([]int, len(excused))
	twice := 0
	for tick := all[0]; tick <= all[len(all)-1]; tick++ {
		ticks++
		switch n := len(f.ran[tick]); {
		case n == 1:
			once++
		case n > 1:
			twice++
			f.t.Errorf("tick %d ran %d times, by schedulers %v", tick, n, f.ran[tick])
		default:
			ok := false
			for i, r := range excused {
				if tick >= r[0] && tick <= r[1] {
					missed[i]++
					ok = true
				}
			}
			if !ok {
				f.t.Errorf("tick %d did not run, and no frozen holder excuses it", tick)
			}
		}
	}
	if ticks < minTicks {
		f.t.Errorf("%d ticks, want at least %d", ticks, minTicks)
	}
	f.t.Logf("ticks %d, ran once %d, ran twice %d, missed %v", ticks, once, twice, missed)
	return ticks, once, missed
}

func lastTick(f *fleet) int64 { return f.ticks[len(f.ticks)-1] }

// awaitRunAndSkips reads until a live scheduler runs a tick and every other
// live one has skipped that tick's run (its lock is held): no scheduler is
// still on its way to that tick. It returns the runner and the lock's name.
func (f *fleet) awaitRunAndSkips() (int, string) {
	f.t.Helper()
	ev := f.await("a run", func(e event) bool { return e.verb == "ran" && !f.frozen[e.id] })
	lockName := ev.rest[2]
	others := func() []int {
		var ids []int
		for _, id := range f.live() {
			if id != ev.id && !f.frozen[id] && !f.skips[lockName][id] {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if len(others()) > 0 {
		f.await(fmt.Sprintf("the skips of %s by %v", lockName, others()), func(event) bool { return len(others()) == 0 })
	}
	return ev.id, lockName
}

func judgeLocker(t *testing.T, f *fleet, addr string) {
	f.awaitTicks(6)

	// SIGKILL the holder of the newest run, within its hold.
	killed, _ := f.awaitRunAndSkips()
	f.kill(killed)
	t.Logf("killed scheduler %d after tick %d", killed, lastTick(f))
	f.awaitTicks(6)

	// SIGSTOP the holder of the newest run, and keep it stopped until the
	// server has handed its run's lock on after its lease: this test's own
	// Acquire of that lock waits in the queue until then.
	frozen, lockName := f.awaitRunAndSkips()
	f.signal(frozen, syscall.SIGSTOP)
	f.frozen[frozen] = true
	freezeTick := lastTick(f)
	t.Logf("stopped scheduler %d after tick %d, holding %s", frozen, freezeTick, lockName)
	ctx, cancel := context.WithTimeout(context.Background(), lineWait)
	defer cancel()
	lk, err := client.New(client.Config{Address: addr}).Acquire(ctx, lockName, lease)
	if err != nil {
		t.Fatalf("waiting for the frozen holder's lease to run out: %v", err)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	f.signal(frozen, syscall.SIGCONT)
	delete(f.frozen, frozen)
	f.await("the resumed scheduler's next line", func(e event) bool { return e.id == frozen })
	resumeTick := lastTick(f)
	t.Logf("resumed scheduler %d at tick %d, past its lease", frozen, resumeTick)

	for len(f.ticks) < minTicks+2 {
		f.awaitTicks(1)
	}
	f.awaitTicks(3)
	f.stop()
	_, _, missed := f.tally([2]int64{freezeTick + 1, resumeTick})
	t.Logf("Locker: missed %d ticks while scheduler %d was frozen past its lease (each run has its own lock, so a frozen holder blocks only its own run)", missed[0], frozen)
}

func judgeElector(t *testing.T, start func(onEvent func(event)) *fleet) {
	leading := map[int]bool{} // by each scheduler's own lines, in its order
	follow := func(e event) {
		switch e.verb {
		case "leader":
			leading[e.id] = true
		case "follower":
			leading[e.id] = false
		case "ran":
			if !leading[e.id] {
				t.Errorf("scheduler %d ran tick %s while not leading", e.id, e.rest[0])
			}
		}
	}
	f := start(follow)
	await := f.await
	leaders := func() []int {
		var ids []int
		for id, on := range leading {
			if on {
				ids = append(ids, id)
			}
		}
		return ids
	}
	var first event
	if ids := leaders(); len(ids) == 1 {
		first.id = ids[0] // it said so before every scheduler was ready
	} else {
		first = await("a leader", func(e event) bool { return e.verb == "leader" })
	}
	await("5 ticks", func(event) bool { return len(f.ticks) >= 5 })

	// SIGKILL the leader after one of its runs; the next in the queue leads.
	await("the leader's run", func(e event) bool { return e.verb == "ran" && e.id == first.id })
	f.kill(first.id)
	leading[first.id] = false
	killTick := lastTick(f)
	second := await("a new leader after the kill", func(e event) bool { return e.verb == "leader" })
	await("the new leader's run", func(e event) bool { return e.verb == "ran" && e.id == second.id })
	afterKill := lastTick(f)
	t.Logf("killed leader %d after tick %d; scheduler %d leads from tick %d", first.id, killTick, second.id, afterKill)
	f.awaitTicks(4)

	// SIGSTOP the leader after one of its runs; another leads once its
	// lease has run out; the frozen one, resumed, leads no more.
	await("the leader's run", func(e event) bool { return e.verb == "ran" && e.id == second.id })
	f.signal(second.id, syscall.SIGSTOP)
	freezeTick := lastTick(f)
	third := await("a new leader after the freeze", func(e event) bool { return e.verb == "leader" && e.id != second.id })
	await("the new leader's run", func(e event) bool { return e.verb == "ran" && e.id == third.id })
	afterFreeze := lastTick(f)
	f.signal(second.id, syscall.SIGCONT)
	await("the resumed leader's giving up", func(e event) bool { return e.verb == "follower" && e.id == second.id })
	t.Logf("stopped leader %d after tick %d; scheduler %d leads from tick %d; the resumed one follows", second.id, freezeTick, third.id, afterFreeze)
	if ids := leaders(); len(ids) != 1 || ids[0] != third.id {
		t.Errorf("leading after the freeze: %v, want only scheduler %d", ids, third.id)
	}

	for len(f.ticks) < minTicks+2 {
		f.awaitTicks(1)
	}
	f.awaitTicks(3)
	f.stop()
	_, _, missed := f.tally([2]int64{killTick + 1, afterKill - 1}, [2]int64{freezeTick + 1, afterFreeze - 1})
	t.Logf("Elector: missed %d ticks at the kill (the next in the queue leads at once), %d while the frozen leader's lease ran out (lease %v)", missed[0], missed[1], lease)
	if missed[0] > 1 {
		t.Errorf("%d ticks missed after the leader was killed: its connection's close hands the lock on at once", missed[0])
	}
	if limit := int(lease/time.Second) + 2; missed[1] > limit {
		t.Errorf("%d ticks missed while the frozen leader's lease ran out, want at most %d with a %v lease", missed[1], limit, lease)
	}
}
