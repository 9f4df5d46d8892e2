package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/faultproxy"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/protocol/admin"
)

// kind is how a holder holds the lock.
type kind int

const (
	goHolder  kind = iota // this binary's "hold": client.Do with Lock.Valid checks
	ctlHolder             // monolockctl run with this binary's "write" as COMMAND
)

// scenario is one fault, done to the old holder of each round while the next
// holder waits in the queue.
type scenario struct {
	name  string
	kind  kind
	proxy bool // the old holder reaches the server through a fault proxy
	// forced: the server hands the lock on at once, by design; only the
	// fencing token protects the resource.
	forced bool
	// paused: the fault stops the holder's process, which may land between
	// the work's last check of Lock.Valid and the write it guards; that one
	// write, in progress at the pause, arrives after the resume, and only its
	// token can stop it. A round may show it (and the fence must reject it),
	// but no second one.
	paused bool
	// command, for ctlHolder, replaces the old holder's COMMAND; %s is the
	// write command line.
	command string
	// writeFlags are extra flags of the old holder's writer.
	writeFlags []string
	// closedStderr gives the old holder a stderr pipe whose reader is gone.
	closedStderr bool
	fault        func(h *harness, r *roundState) error
}

// roundState is what a fault may touch.
type roundState struct {
	lock  string
	old   *proc.Child
	proxy *faultproxy.Proxy
}

func freeze(dir faultproxy.Direction) func(*harness, *roundState) error {
	return func(_ *harness, r *roundState) error { r.proxy.Freeze(dir); return nil }
}

func sendSignal(sig syscall.Signal) func(*harness, *roundState) error {
	return func(_ *harness, r *roundState) error { return r.old.Cmd.Process.Signal(sig) }
}

// stopFor stops the old holder's process for three leases, then lets it go
// on.
func stopFor(h *harness, r *roundState) error {
	if err := r.old.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(3 * h.lease)
	return r.old.Cmd.Process.Signal(syscall.SIGCONT)
}

func forceRelease(h *harness, r *roundState) error {
	resp, err := http.Post("http://"+h.srv.AdminAddr+"/api/locks/"+url.PathEscape(r.lock)+"/release", "", nil)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("force release: %s", resp.Status)
	}
	return nil
}

func noFault(*harness, *roundState) error { return nil }

func scenarios() []scenario {
	return []scenario{
		{name: "Go client, link frozen both ways", kind: goHolder, proxy: true, fault: freeze(faultproxy.Both)},
		{name: "Go client, server→client frozen", kind: goHolder, proxy: true, fault: freeze(faultproxy.ServerToClient)},
		{name: "Go client, client→server frozen", kind: goHolder, proxy: true, fault: freeze(faultproxy.ClientToServer)},
		{name: "Go client, holder process SIGSTOPped for 3 leases", kind: goHolder, paused: true, fault: stopFor},
		{name: "run, link frozen both ways", kind: ctlHolder, proxy: true, fault: freeze(faultproxy.Both)},
		{name: "run, server→client frozen", kind: ctlHolder, proxy: true, fault: freeze(faultproxy.ServerToClient)},
		{name: "run, COMMAND ignores SIGTERM, link frozen", kind: ctlHolder, proxy: true, writeFlags: []string{"-ignore-term"}, fault: freeze(faultproxy.Both)},
		{name: "run, stderr a closed pipe (SIGPIPE), link frozen", kind: ctlHolder, proxy: true, closedStderr: true, fault: freeze(faultproxy.Both)},
		{name: "run, monolockctl SIGSTOPped for 3 leases", kind: ctlHolder, fault: stopFor},
		{name: "run, SIGHUP to monolockctl", kind: ctlHolder, fault: sendSignal(syscall.SIGHUP)},
		{name: "run, SIGKILL to monolockctl", kind: ctlHolder, fault: sendSignal(syscall.SIGKILL)},
		{name: "run, COMMAND backgrounds its writer and exits", kind: ctlHolder, command: "%s & exit 0", writeFlags: []string{"-for", "1s"}, fault: noFault},
		{name: "run, force release (admin API)", kind: ctlHolder, forced: true, fault: forceRelease},
		{name: "run, force release, COMMAND ignores SIGTERM", kind: ctlHolder, forced: true, writeFlags: []string{"-ignore-term"}, fault: forceRelease},
	}
}

// lockPrefix begins the name of every lock of sc's rounds.
func (h *harness) lockPrefix(sc scenario) string { return fmt.Sprintf("s%02d-", h.index(sc)) }

// round runs one round of sc on a lock of its own and reports the hand-over.
func (h *harness) round(sc scenario, i int) (handover, error) {
	st := &roundState{lock: fmt.Sprintf("%sr%03d", h.lockPrefix(sc), i)}
	oldID, nextID := st.lock+"/old", st.lock+"/next"
	addr := h.srv.Addr
	if sc.proxy {
		p, err := faultproxy.New(h.srv.Addr)
		if err != nil {
			return handover{}, err
		}
		defer p.Close()
		st.proxy, addr = p, p.Addr()
	}
	logf, err := os.Create(filepath.Join(h.dir, st.lock+".log"))
	if err != nil {
		return handover{}, err
	}
	defer logf.Close()

	stderr := logf
	if sc.closedStderr {
		r, w, err := os.Pipe()
		if err != nil {
			return handover{}, err
		}
		_ = r.Close()
		defer w.Close()
		stderr = w
	}
	st.old, err = h.start(sc.kind, addr, st.lock, oldID, 0, sc.command, sc.writeFlags, stderr)
	if err != nil {
		return handover{}, err
	}
	defer h.reap(st.old)
	if err := h.res.awaitFirst(oldID, h.patience); err != nil {
		return handover{}, err
	}
	next, err := h.start(sc.kind, h.srv.Addr, st.lock, nextID, 100*time.Millisecond, "", nil, logf)
	if err != nil {
		return handover{}, err
	}
	defer h.reap(next)
	if err := h.awaitQueued(st.lock); err != nil {
		return handover{}, err
	}
	faultDone := make(chan error, 1)
	go func() { faultDone <- sc.fault(h, st) }()
	if err := h.res.awaitFirst(nextID, h.patience); err != nil {
		return handover{}, err
	}
	if err := <-faultDone; err != nil {
		return handover{}, err
	}
	if err := h.awaitExit(next); err != nil {
		return handover{}, fmt.Errorf("next holder: %w", err)
	}
	if err := h.awaitExit(st.old); err != nil {
		return handover{}, fmt.Errorf("old holder: %w", err)
	}
	return h.res.handover(st.lock, oldID, nextID)
}

// start starts a holder of kind k on lock, writing as holder, for dur (0:
// until lost or killed). It runs in a process group of its own: the
// harness's terminal signals do not reach it.
func (h *harness) start(k kind, addr, lock, holder string, dur time.Duration, command string, writeFlags []string, stderr *os.File) (*proc.Child, error) {
	var bin string
	var args []string
	lease := h.lease.String()
	switch k {
	case goHolder:
		bin, args = h.self, []string{"hold", "-addr", addr, "-name", lock, "-lease", lease, "-resource", h.res.addr(), "-holder", holder, "-for", dur.String()}
	case ctlHolder:
		write := append([]string{h.self, "write", "-resource", h.res.addr(), "-holder", holder, "-for", dur.String()}, writeFlags...)
		bin, args = h.ctl, []string{"run", "-addr", addr, "-lease", lease, lock, "--"}
		if command != "" {
			args = append(args, "sh", "-c", fmt.Sprintf(command, shellJoin(write)))
		} else {
			args = append(args, write...)
		}
	}
	return proc.StartChild(bin, proc.ChildOptions{Args: args, Stdout: stderr, Stderr: stderr, NoInput: true})
}

// awaitExit waits for c to exit, at most patience.
func (h *harness) awaitExit(c *proc.Child) error {
	if !c.WaitExit(h.patience) {
		return fmt.Errorf("%v did not exit within %v", c.Cmd.Args[:2], h.patience)
	}
	return nil
}

// reap kills a holder that is still running (SIGKILL to its group; a stopped
// one is continued) and waits for it. monolockctl's guard then kills
// COMMAND's group.
func (h *harness) reap(c *proc.Child) { c.Kill() }

// awaitQueued waits until the lock has a waiter (the next holder).
func (h *harness) awaitQueued(lock string) error {
	return poll.Until(h.patience, func() error {
		resp, err := http.Get("http://" + h.srv.AdminAddr + "/api/locks/" + url.PathEscape(lock))
		if err != nil {
			return poll.Abort(err)
		}
		var info admin.LockInfo
		err = json.NewDecoder(resp.Body).Decode(&info)
		_ = resp.Body.Close()
		if err == nil && len(info.Waiters) > 0 {
			return nil
		}
		return fmt.Errorf("lock %s: no waiter", lock)
	})
}

// shellJoin quotes args for sh.
func shellJoin(args []string) string {
	s := ""
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		s += "'" + a + "'"
	}
	return s
}
