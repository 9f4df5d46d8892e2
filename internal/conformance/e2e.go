package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/protocol/admin"
)

func e2eScenarios() []Scenario {
	return []Scenario{
		{Name: "fifo-across-clients", Server: true, Rule: "FIFO and pushed promotion across client languages (protocol.md scenarios 3, 4)", run: fifoAcrossClients},
		{Name: "force-release", Server: true, Rule: "rule 8 (protocol.md scenario 9): ERROR 0x02 is a loss; a new attempt is allowed", run: forceRelease},
		{Name: "sigterm-restart", Server: true, Rule: "rules 6, 8 (protocol.md scenarios 10, 15): 0x01, reconnect, a larger token after the restart", run: sigtermRestart},
	}
}

// e2eLease is long enough that a busy machine does not lose a lock by
// accident, short enough to keep the scenarios quick.
const e2eLease = 2 * time.Second

// waiters asks the admin API how many sessions queue for name.
func waiters(adminAddr, name string) (int, error) {
	resp, err := http.Get("http://" + adminAddr + "/api/locks/" + url.PathEscape(name))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	var info admin.LockInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return 0, fmt.Errorf("admin API: %w", err)
	}
	return len(info.Waiters), nil
}

// awaitWaiters polls the admin API until n sessions queue for name: the
// order in which the kit starts waiters is then their arrival order.
func (e *Env) awaitWaiters(adminAddr, name string, n int) {
	err := poll.Until(safety, func() error {
		got, err := waiters(adminAddr, name)
		if err != nil {
			return poll.Abort(fmt.Errorf("kit: admin API: %w", err))
		}
		if got != n {
			return fmt.Errorf("%d waiter(s) queued for %q, want %d", got, name, n)
		}
		return nil
	})
	if err != nil {
		e.Failf("rule 1 (queued)", "%v", err)
	}
}

// fifoAcrossClients: a reference holder, then as waiters the judged client,
// every other driver, and the reference again, each queued before the next
// starts. The holder releases; each waiter must be granted in arrival order
// (the others still waiting), with a larger token than the one before, and
// releases in turn.
func fifoAcrossClients(e *Env) {
	srv := e.Server("-admin-listen", "127.0.0.1:0")
	const name = "fifo-across-clients"
	ref := e.cfg.Drivers[0]
	holder := e.Start(ref, ref.Name+" holder", NewRequest(srv.Addr, name, e2eLease))
	held := e.expect("grant", holder, "acquired", safety)
	order := []Driver{e.cfg.Judge}
	for _, d := range e.cfg.Drivers {
		if d.Name != e.cfg.Judge.Name && d.Name != ref.Name {
			order = append(order, d)
		}
	}
	order = append(order, ref)
	procs := make([]*Process, len(order))
	for i, d := range order {
		procs[i] = e.Start(d, fmt.Sprintf("%s waiter %d", d.Name, i+1), NewRequest(srv.Addr, name, e2eLease))
		e.awaitWaiters(srv.AdminAddr, name, i+1)
	}
	prev, _ := strconv.ParseUint(held.Token, 10, 64)
	e.must("driver", holder.Release())
	e.expect("rule 7", holder, "released", safety)
	for i, p := range procs {
		ev := e.expect("FIFO (granted in arrival order)", p, "acquired", safety)
		tok, err := strconv.ParseUint(ev.Token, 10, 64)
		if err != nil || tok <= prev {
			e.Failf("tokens grow", "waiter %d (%s) got token %q after %d", i+1, order[i].Name, ev.Token, prev)
		}
		prev = tok
		for j := i + 1; j < len(procs); j++ {
			if ev, ok := procs[j].Quiet(0); ok {
				e.Failf("FIFO (granted in arrival order)", "waiter %d (%s) printed %s while waiter %d (%s) held the lock", j+1, order[j].Name, ev, i+1, order[i].Name)
			}
		}
		e.must("driver", p.Release())
		e.expect("rule 7", p, "released", safety)
	}
}

// forceRelease: the judged client holds; POST /api/locks/NAME/release: it
// must report lost with code 2, and a new attempt gets a larger token.
func forceRelease(e *Env) {
	srv := e.Server("-admin-listen", "127.0.0.1:0")
	const name = "force-release"
	p := e.StartJudged(NewRequest(srv.Addr, name, e2eLease))
	first := e.expect("grant", p, "acquired", safety)
	resp, err := http.Post("http://"+srv.AdminAddr+"/api/locks/"+name+"/release", "application/json", nil)
	e.must("kit: admin API", err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.Failf("kit: admin API", "force-release answered %s", resp.Status)
	}
	lost := e.expect("rule 8 (ERROR 0x02 is a loss)", p, "lost", safety)
	if lost.Code == nil || *lost.Code != 2 {
		e.Failf("rule 8 (ERROR 0x02 is a loss, with its code)", "the driver printed %s, want code 2", lost)
	}
	e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
	again := e.StartJudged(NewRequest(srv.Addr, name, e2eLease))
	second := e.expect("a retry is allowed after 0x02", again, "acquired", safety)
	a, _ := strconv.ParseUint(first.Token, 10, 64)
	b, _ := strconv.ParseUint(second.Token, 10, 64)
	if b <= a {
		e.Failf("tokens grow", "token %d after the force-release, want more than %d", b, a)
	}
	e.must("driver", again.Release())
	e.expect("rule 7", again, "released", safety)
}

// sigtermRestart: the judged client holds (acquire mode) and, in a second
// session, waits in run mode. SIGTERM: the holder reports lost with code 1;
// the waiter must not report acquired before the new server (same port) is
// up, and then gets a token larger than the holder's.
func sigtermRestart(e *Env) {
	srv := e.Server("-admin-listen", "127.0.0.1:0")
	const name = "sigterm-restart"
	holder := e.Start(e.cfg.Judge, e.cfg.Judge.Name+" holder", NewRequest(srv.Addr, name, e2eLease))
	held := e.expect("grant", holder, "acquired", safety)
	req := NewRequest(srv.Addr, name, e2eLease)
	req.Mode = ModeRun
	waiter := e.Start(e.cfg.Judge, e.cfg.Judge.Name+" waiter", req)
	e.awaitWaiters(srv.AdminAddr, name, 1)
	e.must("kit", srv.Signal(syscall.SIGTERM))
	lost := e.expect("rule 8 (ERROR 0x01 is a loss)", holder, "lost", safety)
	if lost.Code == nil || *lost.Code != 1 {
		e.Failf("rule 8 (ERROR 0x01 is a loss, with its code)", "the holder printed %s, want code 1", lost)
	}
	if !srv.WaitExit(safety) {
		e.Failf("kit", "the server did not exit within %v of SIGTERM", safety)
	}
	restarted := time.Now()
	e.Server("-listen", srv.Addr)
	ev := e.expect("rules 6, 15 (reconnect and queue again after the restart)", waiter, "acquired", 3*safety)
	if ev.At.Before(restarted) {
		e.Failf("rule 10 (never ACQUIRED during shutdown)", "acquired %v before the new server started", restarted.Sub(ev.At))
	}
	a, _ := strconv.ParseUint(held.Token, 10, 64)
	b, _ := strconv.ParseUint(ev.Token, 10, 64)
	if b <= a {
		e.Failf("tokens grow across a restart", "token %d after the restart, want more than the holder's %d", b, a)
	}
	e.must("driver", waiter.Release())
	e.expect("rule 7", waiter, "released", safety)
}
