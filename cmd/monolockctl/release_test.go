package main

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/locktable"
)

// releaseReasons records the reason of every release the server audits.
type releaseReasons struct {
	mu      sync.Mutex
	reasons []string
}

func (r *releaseReasons) Released(_ time.Time, _, _ string, _ net.Addr, _ uint64, _ time.Duration, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}
func (*releaseReasons) Granted(time.Time, string, string, net.Addr, uint64, time.Duration) {}
func (*releaseReasons) Denied(time.Time, string, string, net.Addr)                         {}
func (*releaseReasons) ForceRelease(time.Time, string, string, net.Addr, uint64, string)   {}
func (*releaseReasons) KickWaiter(time.Time, string, string, net.Addr, string)             {}

// TestRunReleasesWithRelease: once COMMAND has exited, monolockctl releases
// with the client's RELEASE (the server closes first, no TIME_WAIT port on
// the client host): the server's audit says "released", not "graceful" (a
// close by the client).
func TestRunReleasesWithRelease(t *testing.T) {
	audit := &releaseReasons{}
	srv := inproc.Start(t, eventloop.Config{IOTimeout: 5 * time.Second, Audit: audit})
	if status, _, stderr := runCtl(t, srv.Addr().String(), nil, "run", "released", "--", "true"); status != 0 {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
	// monolockctl has exited after the server's close; the audit event is
	// recorded as the server's loop handles that close.
	poll.Eventually(t, 10*time.Second, func() error {
		audit.mu.Lock()
		defer audit.mu.Unlock()
		if len(audit.reasons) != 1 || audit.reasons[0] != locktable.ReleaseFrame.String() {
			return fmt.Errorf("release reasons %q, want [released]", audit.reasons)
		}
		return nil
	})
}
