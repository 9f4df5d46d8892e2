// Command elector runs every job of its scheduler on the leader of the
// fleet only: start it on every host; one leads, and another takes over
// when the leader dies or stalls past its lease.
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
	"github.com/monolock/monolock/integrations/gocronlock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c := client.New(client.Config{Address: "127.0.0.1:7070"})
	elector, err := gocronlock.NewElector(ctx, c, "reports-leader", gocronlock.WithLease(10*time.Second),
		gocronlock.OnChange(func(ch gocronlock.Change) {
			if ch.Leader {
				log.Printf("leading under token %d", ch.Token)
			} else {
				log.Printf("no longer leading: %v", ch.Cause)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer elector.Close()
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.NewJob(gocron.DurationJob(30*time.Second), gocron.NewTask(func() {
		lead := elector.Held()
		if !lead.Valid() {
			return // leadership was lost since gocron asked
		}
		log.Printf("compacting under token %d", lead.Token()) // send the token with each write
	}), gocron.WithName("compact"))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-ctx.Done()
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}
}
