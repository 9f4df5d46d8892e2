// Command godriver is the conformance kit's driver for the Go client (package
// client): it reads a request line on stdin, calls the client's public API as
// docs/conformance.md describes, and prints what the API reported as JSON
// lines. It uses nothing a user of the client could not use.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

type request struct {
	Address    string   `json:"address"`
	Addresses  []string `json:"addresses"`
	Name       *string  `json:"name"`
	NameHex    string   `json:"name_hex"`
	LeaseUS    int64    `json:"lease_us"`
	WaitMS     int64    `json:"wait_ms"`
	Mode       string   `json:"mode"`
	WorkStopMS int64    `json:"work_stop_ms"`
	TLS        *struct {
		CAFile     string `json:"ca_file"`
		ServerName string `json:"server_name"`
		CertFile   string `json:"cert_file"`
		KeyFile    string `json:"key_file"`
	} `json:"tls"`
}

// driver prints events and receives the kit's commands.
type driver struct {
	mu   sync.Mutex
	out  *json.Encoder
	cmds <-chan string // "release"; closed at end of input
	req  request
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	if !in.Scan() {
		fmt.Fprintln(os.Stderr, "godriver: no request line on stdin")
		os.Exit(2)
	}
	var req request
	if err := json.Unmarshal(in.Bytes(), &req); err != nil {
		fmt.Fprintf(os.Stderr, "godriver: request line: %v\n", err)
		os.Exit(2)
	}
	cmds := make(chan string, 16)
	go func() {
		defer close(cmds)
		for in.Scan() {
			var c struct {
				Cmd string `json:"cmd"`
			}
			if json.Unmarshal(in.Bytes(), &c) == nil {
				cmds <- c.Cmd
			}
		}
	}()
	d := &driver{out: json.NewEncoder(os.Stdout), cmds: cmds, req: req}
	if err := d.run(); err != nil {
		fmt.Fprintf(os.Stderr, "godriver: %v\n", err)
		os.Exit(2)
	}
}

func (d *driver) emit(ev map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.out.Encode(ev) // an unbuffered os.Stdout: each line leaves at once
}

func (d *driver) run() error {
	raw, err := hex.DecodeString(d.req.NameHex)
	if err != nil {
		return fmt.Errorf("name_hex: %w", err)
	}
	name := string(raw) // Go strings hold any bytes, so invalid UTF-8 reaches the client as is
	lease := time.Duration(d.req.LeaseUS) * time.Microsecond
	cfg := client.Config{Address: d.req.Address, Addrs: d.req.Addresses}
	if d.req.TLS != nil {
		tc, err := d.tlsConfig()
		if err != nil {
			return err
		}
		cfg.Dialer = &tls.Dialer{Config: tc}
	}
	c := client.New(cfg)
	switch d.req.Mode {
	case "acquire":
		d.acquire(c, name, lease)
	case "run":
		// The retrying helper takes its bound from ctx: wait_ms bounds the
		// whole run, retries included.
		ctx := context.Background()
		if d.req.WaitMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(d.req.WaitMS)*time.Millisecond)
			defer cancel()
		}
		d.doRetry(ctx, c, name, lease)
	default:
		return fmt.Errorf("unknown mode %q: want acquire or run", d.req.Mode)
	}
	return nil
}

// tlsConfig is the request's TLS files as a user of the client would load
// them.
func (d *driver) tlsConfig() (*tls.Config, error) {
	t := d.req.TLS
	ca, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("tls ca_file %s: no PEM certificate", t.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls cert_file and key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (d *driver) acquire(c *client.Client, name string, lease time.Duration) {
	// wait_ms is the client's own wait: -1 Acquire, 0 TryAcquire, N
	// AcquireWithin.
	l, err := c.AcquireWithin(context.Background(), name, lease, time.Duration(d.req.WaitMS)*time.Millisecond)
	if err != nil {
		d.failed(err)
		d.drain(nil)
		return
	}
	d.acquired(l.Token())
	select {
	case <-l.Lost():
		d.lost(l.Err())
		asked := d.stopWork()
		_ = l.Close()
		if asked {
			d.emit(map[string]any{"event": "released"})
		}
	case cmd, ok := <-d.cmds:
		_ = l.Close()
		if ok && cmd == "release" {
			d.emit(map[string]any{"event": "released"})
		}
		if !ok {
			return
		}
	}
	d.drain(func() { _ = l.Close() })
}

func (d *driver) doRetry(ctx context.Context, c *client.Client, name string, lease time.Duration) {
	released := false
	called := false
	err := c.DoRetry(ctx, name, lease, func(work context.Context, token uint64) error {
		called = true
		d.acquired(token)
		select {
		case <-work.Done():
			d.lost(context.Cause(work))
			released = d.stopWork()
		case cmd, ok := <-d.cmds:
			released = ok && cmd == "release"
		}
		return nil
	})
	switch {
	case released:
		d.emit(map[string]any{"event": "released"})
	case !called && err != nil:
		d.failed(err)
	}
	d.drain(nil)
}

// stopWork lets the work take work_stop_ms to stop after a loss (forever when
// -1: until the kit asks for the release or its input ends). It reports
// whether the kit asked for the release, which the caller confirms once the
// lock is closed.
func (d *driver) stopWork() (releaseAsked bool) {
	if d.req.WorkStopMS < 0 {
		cmd, ok := <-d.cmds
		d.emit(map[string]any{"event": "work-stopped"})
		return ok && cmd == "release"
	}
	time.Sleep(time.Duration(d.req.WorkStopMS) * time.Millisecond)
	d.emit(map[string]any{"event": "work-stopped"})
	return false
}

// drain answers further release commands (harmless after a loss or a release)
// until the end of input.
func (d *driver) drain(release func()) {
	for cmd := range d.cmds {
		if cmd == "release" {
			if release != nil {
				release()
			}
			d.emit(map[string]any{"event": "released"})
		}
	}
}

func (d *driver) acquired(token uint64) {
	d.emit(map[string]any{"event": "acquired", "token": strconv.FormatUint(token, 10)})
}

func (d *driver) lost(cause error) {
	ev := map[string]any{"event": "lost", "reason": fmt.Sprint(cause)}
	var se *client.ServerError
	if errors.As(cause, &se) {
		ev["code"] = int(se.Code)
	}
	d.emit(ev)
}

// failed reports why an attempt ended before the grant.
func (d *driver) failed(err error) {
	var se *client.ServerError
	var pe *protocol.Error
	switch {
	case errors.As(err, &se):
		d.emit(map[string]any{"event": "error", "code": int(se.Code), "retriable": se.Retryable(), "reason": se.Reason})
	case errors.As(err, &pe):
		d.emit(map[string]any{"event": "invalid-input", "reason": err.Error()})
	case errors.Is(err, client.ErrConnectTimeout):
		// The client's own connect timeout: the server did not answer, which
		// is not the caller's deadline passing while the lock was held.
		d.emit(map[string]any{"event": "unavailable", "reason": err.Error()})
	case errors.Is(err, client.ErrBusy), errors.Is(err, context.DeadlineExceeded):
		d.emit(map[string]any{"event": "busy"})
	default:
		d.emit(map[string]any{"event": "unavailable", "reason": err.Error()})
	}
}
