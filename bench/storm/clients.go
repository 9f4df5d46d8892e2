package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/protocol"
)

// summary is what a client process reports once every one of its clients
// holds or queues on the second server.
type summary struct {
	Answered   []int64 `json:"answered"`    // Unix nanoseconds, one per client
	DialErrors int64   `json:"dial_errors"` // failed attempts on the second server
	Resumed    int64   `json:"resumed"`     // TLS connections to the second server that resumed
}

// runClients is one client process (the "clients" subcommand): n clients
// queue on -first, and when it shuts down (ERROR 0x01) reconnect to -then,
// at once or after the Go client's jitter. It prints "ready" once all hold
// or queue on -first, then "done {summary}" once all do on -then, and
// closes everything when stdin closes.
func runClients(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	first := fs.String("first", "", "the server that shuts down")
	then := fs.String("then", "", "the server the clients move to")
	n := fs.Int("n", 1000, "clients")
	offset := fs.Int("offset", 0, "index of the first client, for lock names")
	locks := fs.Int("locks", 500, "lock names")
	lease := fs.Duration("lease", time.Minute, "lease")
	jitter := fs.Bool("jitter", false, "wait a uniform [0, min(1s, lease/4)] after ERROR 0x01, as the Go client's DoRetry does")
	ca := fs.String("ca", "", "mutual TLS: the CA file that signed the server")
	cert := fs.String("cert", "", "mutual TLS: the client certificate file")
	key := fs.String("key", "", "mutual TLS: its key file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var base *tls.Config
	if *ca != "" {
		var err error
		if base, err = certstest.ClientTLSFromFiles(*ca, *cert, *key); err != nil {
			return err
		}
	}
	stdin := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdin) }()

	var (
		ready, done sync.WaitGroup
		sum         = summary{Answered: make([]int64, *n)}
		dialErrors  atomic.Int64
		resumed     atomic.Int64
		mu          sync.Mutex
		held        []*client.Lock
		failed      = make(chan error, *n)
	)
	sem := make(chan struct{}, 200) // connections being set up on -first at once
	for i := range *n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var cfg *tls.Config
			if base != nil {
				cfg = base.Clone()
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			name := fmt.Sprintf("storm-%d", (*offset+i)%*locks)
			sem <- struct{}{}
			l, err := enqueue(*first, name, *lease, cfg, nil, nil)
			<-sem
			ready.Done()
			if err != nil {
				failed <- fmt.Errorf("client %d on %s: %w", i, *first, err)
				return
			}
			<-l.Lost()
			_ = l.Close()
			if !errors.Is(l.Err(), protocol.ErrShuttingDown) {
				failed <- fmt.Errorf("client %d: lost its place on %s by %v, want ERROR 0x01", i, *first, l.Err())
				return
			}
			if *jitter {
				time.Sleep(time.Duration(rand.Int64N(int64(min(time.Second, *lease/4)) + 1)))
			}
			l, err = enqueue(*then, name, *lease, cfg, &dialErrors, &resumed)
			if err != nil {
				failed <- fmt.Errorf("client %d on %s: %w", i, *then, err)
				return
			}
			sum.Answered[i] = time.Now().UnixNano()
			mu.Lock()
			held = append(held, l)
			mu.Unlock()
		}()
	}
	out := bufio.NewWriter(os.Stdout)
	ready.Wait()
	fmt.Fprintln(out, "ready")
	_ = out.Flush()
	done.Wait()
	select {
	case err := <-failed:
		return err
	default:
	}
	sum.DialErrors, sum.Resumed = dialErrors.Load(), resumed.Load()
	b, _ := json.Marshal(sum)
	fmt.Fprintf(out, "done %s\n", b)
	_ = out.Flush()
	<-stdin
	for _, l := range held {
		_ = l.Close()
	}
	return nil
}

// enqueue dials addr (over TLS with cfg) and queues for name, retrying
// failed attempts for up to two minutes; it counts the failures and the
// resumed handshakes when asked to.
func enqueue(addr, name string, lease time.Duration, cfg *tls.Config, failures, resumed *atomic.Int64) (*client.Lock, error) {
	rd := &recordingDialer{cfg: cfg}
	c := client.New(client.Config{Address: addr, Dialer: rd})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := c.Enqueue(ctx, name, lease)
		cancel()
		if err == nil {
			if resumed != nil && rd.resumed {
				resumed.Add(1)
			}
			return l, nil
		}
		if failures != nil {
			failures.Add(1)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(time.Duration(50+rand.IntN(50)) * time.Millisecond)
	}
}

// recordingDialer dials plain TCP or, with cfg, TLS, and remembers whether
// the last TLS handshake resumed a session.
type recordingDialer struct {
	cfg     *tls.Config
	resumed bool
}

func (d *recordingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.cfg == nil {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	c, err := (&tls.Dialer{Config: d.cfg}).DialContext(ctx, network, addr)
	if err == nil {
		d.resumed = c.(*tls.Conn).ConnectionState().DidResume
	}
	return c, err
}
