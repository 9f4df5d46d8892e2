package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/monolock/monolock/internal/opshttp"
)

// serveHTTP serves h on ln in the background, within the daemon's HTTP
// limits, over TLS when tlsCfg is not nil. The returned server's Addr is the
// bound address. The connection cap counts TCP connections, a TLS one from
// its accept, so clients stalling their handshakes are bounded (and evicted)
// like those stalling their request headers.
func (d *daemon) serveHTTP(name string, ln net.Listener, tlsCfg *tls.Config, h http.Handler) *http.Server {
	lim := d.httpLimits()
	hs := opshttp.NewServer(h, lim, d.log.With().Str("http_server", name).Logger())
	hs.Addr = ln.Addr().String()
	ln = opshttp.LimitListener(hs, ln, lim.MaxConns, d.descriptors)
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.failed <- fmt.Errorf("%s server: %w", name, err)
		}
	}()
	return hs
}

func (d *daemon) httpLimits() opshttp.Limits {
	if d.cfg.httpLimits.MaxConns == 0 {
		return opshttp.DefaultLimits(descriptorLimit())
	}
	return d.cfg.httpLimits
}

// descriptorLimit is the soft RLIMIT_NOFILE, which the Go runtime has
// already raised to the hard limit.
func descriptorLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024 // the common default; errs towards a small cap
	}
	return rl.Cur
}

func isListenError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "listen"
}

// listenError says which setting named an address that cannot be listened
// on, why, and what to do; example is a good address for that setting.
func listenError(setting, example string, err error) error {
	var (
		op      *net.OpError
		addrErr *net.AddrError
		dnsErr  *net.DNSError
		why     string
	)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		why = "address already in use: another process (or another monolock listener) holds this port; stop it or choose another port"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "cannot assign requested address: no network interface of this host has this IP address; use one of its addresses, or 0.0.0.0 for all of them"
	case errors.Is(err, syscall.EACCES):
		why = "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE; choose a port from 1024 up"
	case errors.As(err, &addrErr):
		why = fmt.Sprintf("%s; want host:port with a port from 0 to 65535, such as %s", addrErr.Err, example)
	case errors.As(err, &dnsErr):
		why = fmt.Sprintf("%v; want an IP address (or a host name this machine resolves) and a numeric port, such as %s", dnsErr, example)
	case errors.As(err, &op):
		why = op.Err.Error()
	default:
		why = err.Error()
	}
	return fmt.Errorf("%s: %s", setting, why)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
