package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// Admin queries never starve the loop: while eight clients list, over and
// over, the locks matching a pattern built to make a naive matcher
// backtrack, over up to 15,000 held locks with 255-byte names, a holder with
// a 2 s lease that heartbeats every 20 ms keeps its lock throughout.
func TestAdminQueriesDoNotStarveHolders(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	n := min(15_000, int(rl.Cur)-512)
	if n < 1000 {
		t.Skipf("RLIMIT_NOFILE is %d: too low for this test", rl.Cur)
	}
	p := startServer(t, "-admin-listen", "127.0.0.1:0")
	admin := "http://" + p.AdminAddr

	prefix := strings.Repeat("a", protocol.MaxNameLen-6)
	for i := range n {
		c := wire.MustDial(t, p.Addr, wire.Options{})
		c.SendAcquire(fmt.Sprintf("%s%06d", prefix, i), testLease)
		if f, err := c.ReadErr(30 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
			t.Fatalf("lock %d: %+v, %v", i, f, err)
		}
	}

	holder := wire.MustDial(t, p.Addr, wire.Options{})
	if err := holder.SendErr(wire.Acquire("leader", 2000)); err != nil {
		t.Fatal(err)
	}
	f, err := holder.ReadErr(30 * time.Second)
	if err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v, %v", f, err)
	}
	token := f.Token
	stop := make(chan struct{})
	lost := make(chan error, 1)
	var beats sync.WaitGroup
	beats.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := holder.SendErr(wire.Heartbeat); err != nil {
				lost <- err
				return
			}
			f, err := holder.ReadErr(30 * time.Second)
			if err != nil || f.Type != protocol.TypeAcquired || f.Token != token {
				lost <- fmt.Errorf("heartbeat answered %+v, %v", f, err)
				return
			}
		}
	})

	pattern := "*" + strings.Repeat("a", 200) + "b" // matches none of them
	var queries sync.WaitGroup
	for range 8 {
		queries.Go(func() {
			for range 4 {
				resp, err := http.Get(admin + "/api/locks?match=" + url.QueryEscape(pattern))
				if err != nil {
					t.Errorf("query: %v", err)
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("query: %s", resp.Status)
				}
			}
		})
	}
	queries.Wait()
	close(stop)
	beats.Wait()
	select {
	case err := <-lost:
		t.Fatalf("the holder lost its lock while admin queries ran: %v", err)
	default:
	}
}
