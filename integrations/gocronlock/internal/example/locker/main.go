// Command locker runs a report every minute on one scheduler of the fleet:
// start it on every host, and each minute's run runs once.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/integrations/gocronlock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c := client.New(client.Config{Address: "127.0.0.1:7070"})
	// Every scheduler of the fleet uses the same slot: the resolution of
	// the schedule, here a minute.
	locker := gocronlock.NewLocker(c, gocronlock.WithSlot(time.Minute), gocronlock.WithLease(10*time.Second))
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}

	// The store the report lands in checks the run's fencing token; here
	// in memory, in a service a fence.Table or fence.Admit in the write's
	// transaction (docs/fencing.md).
	var reports fence.Memory
	const job = "minute-report"
	_, err = s.NewJob(gocron.CronJob("* * * * *", false), gocron.NewTask(func(ctx context.Context) error {
		run := gocronlock.Held(locker, job)
		if !run.Valid() {
			return nil // the run's lock was lost: another scheduler may run it
		}
		if err := reports.Admit(ctx, job, run.Token()); err != nil {
			return err // a later run has written: this one is stale
		}
		log.Printf("report for %s written under token %d", run.Slot().Format(time.RFC3339), run.Token())
		return nil
	}), gocron.WithName(job))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-ctx.Done()
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}
}
