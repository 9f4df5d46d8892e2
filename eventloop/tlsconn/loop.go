package tlsconn

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// Config is what the loop's TLS sessions are made with.
type Config struct {
	TLS *tls.Config
	// Identity names the client from its verified certificate; nil for
	// none.
	Identity func(tls.ConnectionState) string
	// MaxHandshakes bounds the handshakes computing at once.
	MaxHandshakes int
	// TurnBytes bounds the ciphertext one turn decrypts for a session; the
	// rest waits for another turn, after the sessions already waiting.
	TurnBytes int
	// Failed, if set, is told of every handshake crypto/tls refuses, on the
	// handshake goroutine, before the client can have read the alert and
	// closed. It must not block.
	Failed func(remote net.Addr, err error)
}

// Loop is what a loop's TLS sessions share: their configuration, the
// compute slots and goroutines of their handshakes, and the buffer a turn
// decrypts into.
type Loop struct {
	cfg     Config
	scratch []byte // the plaintext of the turn in progress, for any session
	slots   cpuSlots
	ctx     context.Context // ended by Stop
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the handshake goroutines and their last wake-ups
}

func NewLoop(cfg Config) *Loop {
	ctx, cancel := context.WithCancel(context.Background())
	return &Loop{
		cfg: cfg,
		// One turn decrypts at most TurnBytes; one more record's plaintext
		// on top lets a turn that stops there know that more is waiting.
		scratch: make([]byte, 0, cfg.TurnBytes+maxRecordPlaintext),
		slots:   make(cpuSlots, cfg.MaxHandshakes),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// Init makes c, a zero Conn, a session of l; OnOpen then joins it to its
// connection (Join).
func (l *Loop) Init(c *Conn) { c.loop = l; c.tr.turnBytes = l.cfg.TurnBytes }

// Stop lets the handshakes in flight finish for up to grace (they join the
// loop, which then refuses them as it does every session at shutdown), ends
// the rest and waits for their goroutines.
func (l *Loop) Stop(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	l.cancel()
	<-done
}
