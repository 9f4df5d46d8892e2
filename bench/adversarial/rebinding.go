package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// --- 14: DNS rebinding -------------------------------------------------------
//
// A page on attacker.example whose name the attacker rebinds to 127.0.0.1
// is, to the browser, same-origin with the admin and ops ports: its fetches
// carry "Host: attacker.example:PORT" and "Sec-Fetch-Site: same-origin",
// which the admin API's cross-site check lets through. The attack sends
// exactly those requests: read the lock table, force-release a held lock,
// kick its waiter, read /metrics. Each must be refused with 421 and the
// holder and the waiter keep their places; the same reads with the bound
// address and with localhost as Host must still be answered, as the console
// and Prometheus need.

const (
	rebindHost = "attacker.example"
	rebindLock = "adversarial/rebinding"
)

type rebindTarget struct {
	holder *wire.Conn
	token  uint64
	waiter *wire.Conn
}

func prepareRebinding(e *env) (rebindTarget, []*witnesses, func(), error) {
	h, err := wire.Dial(e.tPlain.addr, wire.Options{Safety: 30 * time.Second})
	if err != nil {
		return rebindTarget{}, nil, nil, err
	}
	f, err := h.RequestErr(protocol.AppendAcquire(nil, 600_000, rebindLock))
	if err == nil && f.Type != protocol.TypeAcquired {
		err = fmt.Errorf("ACQUIRE %s: got %v", rebindLock, f)
	}
	if err != nil {
		_ = h.NC.Close()
		return rebindTarget{}, nil, nil, err
	}
	ws, err := holders(e.tPlain, 1, func(int) string { return rebindLock }, protocol.TypeWaiting)
	if err != nil {
		_ = h.NC.Close()
		return rebindTarget{}, nil, nil, err
	}
	return rebindTarget{holder: h, token: f.Token, waiter: ws[0]}, nil, func() { _ = h.NC.Close(); closeAll(ws) }, nil
}

// rebindCall is one request of the page, with the Host its browser sends.
type rebindCall struct {
	what, method, addr, path string
}

func runRebinding(ctx context.Context, e *env, rebind rebindTarget) string {
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(c rebindCall, host string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, c.method, "http://"+c.addr+c.path, nil)
		if err != nil {
			return 0, err
		}
		_, port, _ := net.SplitHostPort(c.addr)
		req.Host = strings.ReplaceAll(host, "PORT", port)
		if c.method != "GET" { // what Chromium sends with the page's own fetch
			req.Header.Set("Origin", "http://"+req.Host)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	lockPath := "/api/locks/" + url.PathEscape(rebindLock)
	attacks := []rebindCall{
		{"lock table read", "GET", e.plain.AdminAddr, "/api/locks"},
		{"waiter kicked", "DELETE", e.plain.AdminAddr, lockPath + "/waiters/" + url.PathEscape(rebind.waiter.LocalAddr())},
		{"lock force-released", "POST", e.plain.AdminAddr, lockPath + "/release"},
		{"metrics read", "GET", e.plain.OpsAddr, "/metrics"},
	}
	var got, let []string
	for _, c := range attacks {
		code, err := do(c, rebindHost+":PORT")
		switch {
		case err != nil:
			got = append(got, fmt.Sprintf("%s %s: %v", c.method, c.path, err))
		case code == http.StatusMisdirectedRequest:
			got = append(got, fmt.Sprintf("%s 421", c.method))
		default:
			got = append(got, fmt.Sprintf("%s %d", c.method, code))
			let = append(let, c.what)
		}
	}
	// The console at the bound address and at localhost, and a scrape of
	// the ops port by its IP, must still be answered.
	var refused []string
	for _, c := range []struct {
		call rebindCall
		host string
	}{
		{rebindCall{"console", "GET", e.plain.AdminAddr, "/api/info"}, "localhost:PORT"},
		{rebindCall{"console", "GET", e.plain.AdminAddr, consolePage}, "127.0.0.1:PORT"},
		{rebindCall{"scrape", "GET", e.plain.OpsAddr, "/metrics"}, "127.0.0.1:PORT"},
	} {
		if code, err := do(c.call, c.host); err != nil || code != http.StatusOK {
			refused = append(refused, fmt.Sprintf("%s %s with Host %s: %d %v", c.call.method, c.call.path, c.host, code, err))
		}
	}
	// The witnesses watch the servers a moment longer, and the holder and
	// the waiter hear of any change.
	pause(ctx, 2*time.Second)
	// The holder keeps its lock (its heartbeat is answered ACQUIRED with its
	// token), the waiter its place (it has not been closed).
	kept := "the holder kept its lock and the waiter its place"
	f, err := rebind.holder.RequestErr(protocol.AppendHeartbeat(nil))
	if err != nil || f.Type != protocol.TypeAcquired || f.Token != rebind.token {
		kept = fmt.Sprintf("the holder lost its lock (heartbeat: %v %v)", f, err)
		let = append(let, "holder lost its lock")
	}
	_ = rebind.waiter.NC.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := rebind.waiter.NC.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		kept += "; the waiter was closed or told something"
		let = append(let, "waiter lost its place")
	}
	note := fmt.Sprintf("Host %s: %s; %s", rebindHost, strings.Join(got, ", "), kept)
	if len(refused) > 0 {
		note += " — " + violation + ": the console or a scrape refused: " + strings.Join(refused, "; ")
	}
	if len(let) > 0 {
		note += " — " + violation + ": " + strings.Join(let, ", ")
	}
	return note
}
