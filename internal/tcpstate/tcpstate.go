// Package tcpstate reads the kernel's table of TCP sockets (Linux's
// /proc/net/tcp and /proc/net/tcp6) to tell which local ports are left in
// TIME_WAIT.
//
// It exists for one question: after a release, does the client host keep a
// TIME_WAIT entry for the client's port? Whoever sends the first FIN of a
// connection keeps it for 60 s, and each one costs the client host an
// ephemeral port towards that server address; monolock's RELEASE makes the
// server close first so that none is left on the client. The table is per
// network namespace: it describes the namespace of the process that reads
// it. Loopback keeps TIME_WAIT entries visible (it only reuses them), so the
// check is meaningful on 127.0.0.1 too.
package tcpstate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

// State is a socket's state as the kernel numbers it (include/net/tcp_states.h).
type State uint8

// The states this package is asked about.
const (
	Established State = 0x01
	FinWait2    State = 0x05
	TimeWait    State = 0x06
	Close       State = 0x07
	CloseWait   State = 0x08
	LastAck     State = 0x09
	Listen      State = 0x0a
)

// Socket is one row of the table.
type Socket struct {
	LocalPort, RemotePort uint16
	State                 State
}

// Tables are the kernel's files, IPv4 then IPv6.
var Tables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// ErrUnavailable is returned where the kernel has no such table (not Linux,
// or /proc not mounted): a caller cannot check, and must say so.
var ErrUnavailable = errors.New("tcpstate: /proc/net/tcp is not readable (Linux with /proc is needed to see TIME_WAIT entries)")

// Sockets returns every TCP socket of the calling process's network
// namespace, IPv4 and IPv6.
func Sockets() ([]Socket, error) {
	var all []Socket
	for _, path := range Tables {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) && path != Tables[0] {
			continue // IPv6 disabled: no tcp6 table
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		socks, err := Parse(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		all = append(all, socks...)
	}
	return all, nil
}

// Parse reads one table in the kernel's format: a header line, then one
// line per socket, "sl local_address rem_address st ...", addresses as
// HEXADDR:HEXPORT and the state in hex.
func Parse(r io.Reader) ([]Socket, error) {
	var out []Socket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 0; sc.Scan(); line++ {
		if line == 0 {
			continue // the header
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 4: %q", line+1, len(fields), sc.Text())
		}
		local, err := port(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: local address: %w", line+1, err)
		}
		remote, err := port(fields[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: remote address: %w", line+1, err)
		}
		st, err := strconv.ParseUint(fields[3], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("line %d: state %q: %w", line+1, fields[3], err)
		}
		out = append(out, Socket{LocalPort: local, RemotePort: remote, State: State(st)})
	}
	return out, sc.Err()
}

// port reads the port of an address written HEXADDR:HEXPORT.
func port(addr string) (uint16, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("%q has no port", addr)
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", addr, err)
	}
	return uint16(p), nil
}

// Count returns how many sockets are in state st, over all ports.
func Count(socks []Socket, st State) int {
	n := 0
	for _, s := range socks {
		if s.State == st {
			n++
		}
	}
	return n
}

// Settled reports, for the sockets of the calling process's network
// namespace whose LOCAL port is localPort and remote port remotePort (one
// connection: a local port is reused towards other remote addresses while
// an old entry waits), how many are in TIME_WAIT, and
// whether the connection on that port has finished closing: no socket on
// it is in any other state. A connection closed second passes through
// LAST_ACK to nothing; one closed first passes through FIN_WAIT to
// TIME_WAIT. Ask until settled (the last ACK may still be in flight), then
// read timeWait. On loopback the server's own entries for the connection
// have the port as their remote port and are not counted.
func Settled(localPort, remotePort int) (timeWait int, settled bool, err error) {
	socks, err := Sockets()
	if err != nil {
		return 0, false, err
	}
	settled = true
	for _, s := range socks {
		if int(s.LocalPort) != localPort || int(s.RemotePort) != remotePort {
			continue
		}
		switch s.State {
		case TimeWait:
			timeWait++
		case Close, Listen:
		default:
			settled = false
		}
	}
	return timeWait, settled, nil
}

// TimeWaitAfterClose waits, up to within, until the connection from
// localPort to remotePort has finished closing (see Settled), and returns how
// many TIME_WAIT entries it left on the local side.
func TimeWaitAfterClose(localPort, remotePort int, within time.Duration) (int, error) {
	var n int
	err := poll.Until(within, func() error {
		tw, settled, err := Settled(localPort, remotePort)
		if err != nil {
			return poll.Abort(err)
		}
		if !settled {
			return fmt.Errorf("the connection from port %d to port %d has not finished closing", localPort, remotePort)
		}
		n = tw
		return nil
	})
	return n, err
}

// ConnTimeWait is TimeWaitAfterClose for a connection already closed,
// named by its net.Conn (its TCP addresses).
func ConnTimeWait(conn net.Conn, within time.Duration) (int, error) {
	local, lok := conn.LocalAddr().(*net.TCPAddr)
	remote, rok := conn.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("tcpstate: %v → %v is not a TCP connection", conn.LocalAddr(), conn.RemoteAddr())
	}
	return TimeWaitAfterClose(local.Port, remote.Port, within)
}
