// Command scheduler is one scheduler of the fleet the integration's judge
// (fleet_test.go) runs: a gocron scheduler with a job every second, run once
// per fleet by the Locker (-mode locker) or by the leader only (-mode
// elector). It writes one line per event on stdout and shuts down when its
// stdin ends:
//
//	ready
//	ran SLOT TOKEN LOCK       the job ran for the tick SLOT (Unix seconds)
//	skip ERROR                the Locker skipped a run (another has it)
//	lost SLOT LOCK            the job found its run's lock no longer valid
//	leader TOKEN              the Elector leads
//	follower CAUSE            the Elector no longer leads
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/integrations/gocronlock"
)

// job is the judge's job name.
const job = "tick"

var outMu sync.Mutex

func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

func main() {
	addr := flag.String("addr", client.DefaultAddress, "the monolock server")
	mode := flag.String("mode", "locker", "locker: each tick runs once per fleet; elector: the leader runs every tick")
	lease := flag.Duration("lease", 2*time.Second, "the locks' lease")
	leaderLock := flag.String("leader-lock", "gocron-judge-leader", "the Elector's lock")
	flag.Parse()
	if err := run(*addr, *mode, *lease, *leaderLock); err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

func run(addr, mode string, lease time.Duration, leaderLock string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(client.Config{Address: addr})
	var (
		opts []gocron.SchedulerOption
		task func()
		stop = func() {}
	)
	switch mode {
	case "locker":
		locker := gocronlock.NewLocker(c, gocronlock.WithLease(lease))
		opts = append(opts, gocron.WithDistributedLocker(locker))
		task = func() {
			h := gocronlock.Held(locker, job)
			if !h.Valid() {
				say("lost %d %s", h.Slot().Unix(), h.LockName())
				return
			}
			say("ran %d %d %s", h.Slot().Unix(), h.Token(), h.LockName())
		}
	case "elector":
		e, err := gocronlock.NewElector(ctx, c, leaderLock, gocronlock.WithLease(lease),
			gocronlock.OnChange(func(ch gocronlock.Change) {
				if ch.Leader {
					say("leader %d", ch.Token)
				} else {
					say("follower %v", ch.Cause)
				}
			}))
		if err != nil {
			return err
		}
		stop = func() { _ = e.Close() }
		opts = append(opts, gocron.WithDistributedElector(e))
		task = func() {
			slot := time.Now().Truncate(time.Second)
			h := e.Held()
			if !h.Valid() {
				say("lost %d %s", slot.Unix(), h.LockName())
				return
			}
			say("ran %d %d %s", slot.Unix(), h.Token(), h.LockName())
		}
	default:
		return fmt.Errorf("-mode %q: use locker or elector", mode)
	}
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		return err
	}
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(task), gocron.WithName(job),
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
			say("skip %v", err)
		})))
	if err != nil {
		return err
	}
	s.Start()
	say("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // runs until stdin ends
	err = s.Shutdown()
	stop()
	return err
}
