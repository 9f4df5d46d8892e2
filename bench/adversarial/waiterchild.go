package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/protocol"
)

// Attacks 9 and 10 at full size hold more waiters than one process may
// have descriptors: the waiters beyond this process's share are held by
// child processes, each under its own limit. A child is this binary run
// with -waiter-child: it queues its waiters, writes "ready N", holds them
// silent until its stdin closes, and exits.

// childWaiters is how many waiters one child holds at most.
const childWaiters = 15_000

// waiterChild is the child's side; the flags say where and how.
type waiterChild struct {
	addr, ca, cert, key string
	from                string        // the local address to connect from
	heartbeat           time.Duration // each waiter's heartbeat interval; 0 for never
	n                   int
}

func (c *waiterChild) flags() {
	flag.StringVar(&c.addr, "waiter-child", "", "internal: run as a child holding -waiter-count silent waiters at this address")
	flag.IntVar(&c.n, "waiter-count", 0, "internal: the child's waiters")
	flag.StringVar(&c.ca, "waiter-ca", "", "internal: the child's CA file (mutual TLS)")
	flag.StringVar(&c.cert, "waiter-cert", "", "internal: the child's certificate file (mutual TLS)")
	flag.StringVar(&c.key, "waiter-key", "", "internal: the child's key file (mutual TLS)")
	flag.StringVar(&c.from, "waiter-from", "", "internal: the local address the child's waiters connect from")
	flag.DurationVar(&c.heartbeat, "waiter-heartbeat", 0, "internal: the child's waiters heartbeat this often (0: never)")
}

// run holds the waiters until stdin closes, heartbeating if told to; it
// reports its exit status.
func (c *waiterChild) run() int {
	t := target{name: "child", addr: c.addr, from: c.from}
	if c.ca != "" {
		cfg, err := certstest.ClientTLSFromFiles(c.ca, c.cert, c.key)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
		t.tls = cfg
	}
	conns, err := holders(t, c.n, func(int) string { return silentQueue }, protocol.TypeWaiting)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		if c.heartbeat > 0 {
			heartbeatSlowly(ctx, conns, c.heartbeat)
		}
	}()
	fmt.Printf("ready %d\n", len(conns))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until EOF
	stop()
	<-beating
	closeAll(conns)
	return 0
}

// startWaiterChild runs a child holding n waiters on t and waits until
// they are queued.
func startWaiterChild(e *env, t target, n int, heartbeat time.Duration) (*proc.Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-waiter-child", t.addr, "-waiter-count", strconv.Itoa(n), "-waiter-from", t.from, "-waiter-heartbeat", heartbeat.String()}
	if t.tls != nil {
		pair := e.pki.Clients[certstest.ClientURI]
		args = append(args, "-waiter-ca", e.pki.CA, "-waiter-cert", pair.Cert, "-waiter-key", pair.Key)
	}
	ch, err := proc.StartChild(self, proc.ChildOptions{Name: "waiter child", Args: args})
	if err != nil {
		return nil, err
	}
	l, err := ch.Next(5 * time.Minute)
	if err == nil && l.Text != fmt.Sprintf("ready %d", n) {
		err = errors.New(l.Text)
	}
	if err != nil {
		ch.Kill()
		return nil, fmt.Errorf("a child holding %d waiters: %w", n, err)
	}
	return ch, nil
}
