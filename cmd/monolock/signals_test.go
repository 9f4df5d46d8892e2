package main

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSIGTERMInASIGHUPStorm: SIGHUPs as fast as this machine can send them,
// before, during and after a SIGTERM, to a server whose reload rereads TLS
// files and an ACL and reopens an audit log: the SIGTERM is never lost and
// the exit status is 0 every time (a late SIGHUP does not end the process by
// its default action, status 129). Everything awaited is an event: a reload
// line in the log, the process's exit.
func TestSIGTERMInASIGHUPStorm(t *testing.T) {
	const trials = 10
	_, pki, aclPath := labFiles(t)
	for trial := range trials {
		p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA,
			"-acl-file", aclPath, "-audit-log", filepath.Join(t.TempDir(), "audit.jsonl"))
		// A pidfd names this process and no later one with its pid.
		pidfd, err := unix.PidfdOpen(p.Pid(), 0)
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("no pidfd_open on this kernel")
		}
		if err != nil {
			t.Fatal(err)
		}
		var sent atomic.Int64
		var storm sync.WaitGroup
		stormBegan := time.Now()
		for range 2 {
			storm.Add(1)
			go func() {
				defer storm.Done()
				for {
					select {
					case <-p.Done():
						return
					default:
					}
					if unix.PidfdSendSignal(pidfd, unix.SIGHUP, nil, 0) != nil {
						return // the process is gone
					}
					sent.Add(1)
				}
			}()
		}
		p.MustWaitLog(t, "SIGHUP: audit log reopened")
		if err := unix.PidfdSendSignal(pidfd, unix.SIGTERM, nil, 0); err != nil {
			t.Fatalf("trial %d: SIGTERM: %v", trial, err)
		}
		if !p.WaitExit(time.Minute) {
			t.Fatalf("trial %d: SIGTERM lost: the server still runs a minute after it, %d SIGHUPs sent", trial, sent.Load())
		}
		storm.Wait()
		_ = unix.Close(pidfd)
		if err := p.Err(); err != nil {
			t.Fatalf("trial %d: exit %v after SIGTERM in a SIGHUP storm, want status 0", trial, err)
		}
		t.Logf("trial %d: exit 0; %d SIGHUPs sent, %.0f/s", trial, sent.Load(), float64(sent.Load())/time.Since(stormBegan).Seconds())
	}
}
