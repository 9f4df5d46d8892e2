package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// --- 13: a wall of open consoles ---------------------------------------------

// The console (internal/adminhttp/console) polls GET /api/info, then one
// page of GET /api/locks, every consoleRefresh, over one keep-alive
// connection, never overlapping its own polls, each request given up after
// consoleTimeout.
const (
	consoleCount   = 50
	consoleLocks   = 10_000
	consoleRefresh = 2 * time.Second
	consoleTimeout = 10 * time.Second
	consolePage    = "/api/locks?limit=50"
)

// prepareConsoleLocks returns the holders of the locks the consoles show.
func prepareConsoleLocks(e *env) ([]*wire.Conn, []*witnesses, func(), error) {
	hs, err := holders(e.tPlain, fdRoom(consoleLocks), func(i int) string { return fmt.Sprintf("console/%05d", i) }, protocol.TypeAcquired)
	if err != nil {
		return nil, nil, nil, err
	}
	return hs, nil, func() { closeAll(hs) }, nil
}

// runConsoles opens consoleCount consoles at once, each with a connection
// of its own as each operator's browser has, refreshing on the same 2 s
// ticks: every poll of every console lands together.
func runConsoles(ctx context.Context, e *env, consoleHeld []*wire.Conn) string {
	base := "http://" + e.plain.AdminAddr
	var (
		mu       sync.Mutex
		answered int
		failed   = map[string]int{}
		worst    time.Duration
		polls    []time.Duration
	)
	get := func(hc *http.Client, path string) (string, bool) {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return "", true
			}
			return "error: " + err.Error(), false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return fmt.Sprint(resp.StatusCode), false
	}
	ticker := time.NewTicker(consoleRefresh)
	defer ticker.Stop()
	ticks := make([]chan struct{}, consoleCount)
	var wg sync.WaitGroup
	for i := range consoleCount {
		ticks[i] = make(chan struct{}, 1)
		hc := &http.Client{Timeout: consoleTimeout, Transport: &http.Transport{}}
		wg.Go(func() {
			defer hc.CloseIdleConnections()
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticks[i]:
				}
				start := time.Now()
				var codes [2]string
				var ended [2]bool
				for j, path := range []string{"/api/info", consolePage} {
					codes[j], ended[j] = get(hc, path)
				}
				took := time.Since(start)
				mu.Lock()
				for j, c := range codes {
					switch {
					case ended[j]:
					case c == "200":
						answered++
					default:
						failed[c]++
					}
				}
				if !ended[0] && !ended[1] {
					polls = append(polls, took)
					worst = max(worst, took)
				}
				mu.Unlock()
			}
		})
	}
	tick := func() {
		for _, t := range ticks {
			select {
			case t <- struct{}{}:
			default: // that console's last poll is still running: it skips one
			}
		}
	}
	tick()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-ticker.C:
			tick()
		}
	}
	wg.Wait()
	slices.Sort(polls)
	median := time.Duration(0)
	if len(polls) > 0 {
		median = polls[len(polls)/2]
	}
	failures := "none failed"
	if len(failed) > 0 {
		failures = fmt.Sprintf("failed: %v", failed)
	}
	return fmt.Sprintf("%d consoles every %v on %d held locks: %d requests answered 200, %s; a poll (both requests) took %v median, %v at worst",
		consoleCount, consoleRefresh, len(consoleHeld), answered, failures, median.Round(time.Millisecond), worst.Round(time.Millisecond))
}
