package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/monolock/monolock/internal/testsupport/faultproxy"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

// faultStats counts the faults injected, by kind.
type faultStats struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *faultStats) add(kind string) {
	s.mu.Lock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[kind]++
	s.mu.Unlock()
}

func (s *faultStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.n))
	for k := range s.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, s.n[k])
	}
	return strings.Join(parts, ", ")
}

// faultSchedule sets the timing of the faults on one proxy.
type faultSchedule struct {
	minQuiet, maxQuiet   time.Duration // between faults
	minFreeze, maxFreeze time.Duration // freeze length, log-uniform
	maxDelay             time.Duration // added latency per direction
}

// injectFaults runs one proxy's fault loop until stop: after a random quiet
// period it freezes one direction or both for a random time (often longer than
// the clients' leases), cuts every connection, or delays the bytes for a
// while. It leaves the proxy thawed and undelayed.
func injectFaults(stop context.Context, p *faultproxy.Proxy, fs faultSchedule, stats *faultStats) {
	defer func() {
		p.Thaw(faultproxy.Both)
		p.SetDelay(0)
	}()
	for {
		_ = poll.Sleep(stop, fs.minQuiet+rand.N(fs.maxQuiet-fs.minQuiet))
		if stop.Err() != nil {
			return
		}
		freeze := logUniform(fs.minFreeze, fs.maxFreeze)
		switch k := rand.IntN(100); {
		case k < 25:
			stats.add("freeze client→server")
			p.Freeze(faultproxy.ClientToServer)
			_ = poll.Sleep(stop, freeze)
			p.Thaw(faultproxy.ClientToServer)
		case k < 50:
			stats.add("freeze server→client")
			p.Freeze(faultproxy.ServerToClient)
			_ = poll.Sleep(stop, freeze)
			p.Thaw(faultproxy.ServerToClient)
		case k < 70:
			stats.add("freeze both")
			p.Freeze(faultproxy.Both)
			_ = poll.Sleep(stop, freeze)
			// A partition that heals with a cut, or just heals.
			if rand.IntN(3) == 0 {
				p.CutAll()
			}
			p.Thaw(faultproxy.Both)
		case k < 85:
			stats.add("cut")
			p.CutAll()
		default:
			stats.add("delay")
			p.SetDelay(time.Millisecond + rand.N(fs.maxDelay))
			_ = poll.Sleep(stop, logUniform(200*time.Millisecond, 4*time.Second))
			p.SetDelay(0)
		}
	}
}
