package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// --- 15, 16: full lock listings against the console ----------------------------
//
// A full GET /api/locks of consoleLocks held locks is megabytes. 15: one
// client asks for it and never reads the answer, so the server's write
// waits for the write timeout. 16: four clients each ask for it ten times a
// second, whatever became of their last request (a dashboard polling with
// curl), for listingWarmUp before the consoles start. Meanwhile twelve consoles poll as the console does (GET /api/info,
// then GET /api/locks?limit=50, each given up after consoleTimeout), one
// every 500 ms, each on a connection of its own: all twelve polls must be
// answered 200.

const (
	listingPolls      = 12
	listingPollEvery  = 500 * time.Millisecond
	listingPollers    = 4
	listingPollerRate = 100 * time.Millisecond // ten a second
	listingWarmUp     = 2 * time.Second
)

// listingHeld are the held locks, each named with listingNamePad bytes
// so that a full listing is larger than what a loopback socket's buffers
// take in: a client that does not read keeps the server writing.

const listingNamePad = 240

func prepareLongListing(e *env) ([]*wire.Conn, []*witnesses, func(), error) {
	pad := strings.Repeat("x", listingNamePad)
	hs, err := holders(e.tPlain, fdRoom(consoleLocks), func(i int) string { return fmt.Sprintf("listing/%s/%05d", pad, i) }, protocol.TypeAcquired)
	if err != nil {
		return nil, nil, nil, err
	}
	return hs, nil, func() { closeAll(hs) }, nil
}

// runNonReader holds one full listing unread while the consoles poll.
func runNonReader(ctx context.Context, e *env, _ []*wire.Conn) string {
	size := fullListingSize(e) // before the non-reader, which may hold the turn
	d := net.Dialer{Timeout: time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		// A small receive window: the answer stays in the server's buffers.
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.DialContext(ctx, "tcp", e.plain.AdminAddr)
	if err != nil {
		return fmt.Sprintf("could not connect the non-reading client: %v — %s", err, violation)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /api/locks HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return fmt.Sprintf("could not send the non-reading client's request: %v — %s", err, violation)
	}
	polls := pollConsoles(e)
	return fmt.Sprintf("one client not reading a full listing (%s): %s", size, polls.verdict())
}

// runFullPollers runs four clients asking for every lock ten times a
// second; once they have asked for listingWarmUp, the consoles poll, and
// the clients go on until the last poll is answered or given up.
func runFullPollers(_ context.Context, e *env, listingHeld []*wire.Conn) string {
	// Bounded by the polls, not by -duration: the pollers must outlast them.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range listingPollers {
		hc := &http.Client{Timeout: consoleTimeout, Transport: &http.Transport{}}
		wg.Go(func() {
			defer hc.CloseIdleConnections()
			tick := time.NewTicker(listingPollerRate)
			defer tick.Stop()
			var each sync.WaitGroup
			defer each.Wait()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				each.Go(func() {
					code, _ := get(ctx, hc, "http://"+e.plain.AdminAddr+"/api/locks")
					if code == "" {
						return // ended with the attack
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				})
			}
		})
	}
	pause(ctx, listingWarmUp)
	polls := pollConsoles(e)
	stop()
	wg.Wait()
	return fmt.Sprintf("%d clients asking for all %d locks %d times a second (answers %v): %s",
		listingPollers, len(listingHeld), time.Second/listingPollerRate, codes, polls.verdict())
}

// get asks for path and reads the whole answer; its status, "error: …",
// or "" when ctx ended first.
func get(ctx context.Context, hc *http.Client, u string) (string, int64) {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0
		}
		return "error: " + err.Error(), 0
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	switch {
	case err != nil && ctx.Err() != nil:
		return "", n
	case err != nil:
		return "error: " + err.Error(), n
	}
	return fmt.Sprint(resp.StatusCode), n
}

// fullListingSize is the size of a full listing, read by a client that
// reads.
func fullListingSize(e *env) string {
	hc := &http.Client{Timeout: consoleTimeout}
	code, n := get(context.Background(), hc, "http://"+e.plain.AdminAddr+"/api/locks")
	if code != "200" {
		return "a reading client's full listing: " + code
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// consolePolls is what the twelve consoles saw.
type consolePolls struct {
	answered  int
	failed    []string
	took      []time.Duration // each answered poll, both requests
	worstInfo time.Duration
}

// pollConsoles runs listingPolls console polls, one every
// listingPollEvery, each over a connection of its own, and waits for all.
func pollConsoles(e *env) consolePolls {
	var (
		mu  sync.Mutex
		out consolePolls
		wg  sync.WaitGroup
	)
	base := "http://" + e.plain.AdminAddr
	for i := range listingPolls {
		if i > 0 {
			time.Sleep(listingPollEvery)
		}
		wg.Go(func() {
			hc := &http.Client{Timeout: consoleTimeout, Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			start := time.Now()
			info, _ := get(context.Background(), hc, base+"/api/info")
			tookInfo := time.Since(start)
			page, _ := get(context.Background(), hc, base+consolePage)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			out.worstInfo = max(out.worstInfo, tookInfo)
			if info == "200" && page == "200" {
				out.answered++
				out.took = append(out.took, took)
				return
			}
			out.failed = append(out.failed, fmt.Sprintf("/api/info %s, page %s after %v", info, page, took.Round(time.Millisecond)))
		})
	}
	wg.Wait()
	return out
}

func (p consolePolls) verdict() string {
	sort.Slice(p.took, func(i, j int) bool { return p.took[i] < p.took[j] })
	worst := time.Duration(0)
	if len(p.took) > 0 {
		worst = p.took[len(p.took)-1]
	}
	s := fmt.Sprintf("console polls answered %d of %d (worst answered poll %v, worst /api/info %v)",
		p.answered, listingPolls, worst.Round(time.Millisecond), p.worstInfo.Round(time.Millisecond))
	if p.answered < listingPolls {
		first := p.failed[0]
		s += fmt.Sprintf(" — %s: %d polls failed, first: %s", violation, len(p.failed), strings.TrimSpace(first))
	}
	return s
}
