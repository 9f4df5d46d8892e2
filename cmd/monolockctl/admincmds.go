package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

const adminFlagsHelp = `Flags:
%s
The admin API is the server's -admin-listen address. On loopback it may be
plain HTTP without authentication, and these commands run on the server's
host. Elsewhere it speaks HTTPS with mutual TLS: give -admin-tls-ca and an
operator certificate (-admin-tls-cert, -admin-tls-key) whose identity the
server's admin ACL grants the role the command needs: read (locks, lock,
info), release, or kick; 'monolockctl whoami' shows yours. A command without
its role is refused (exit 1) with the rule that would grant it. Give -admin
a full URL (https://...) when the API sits behind a proxy; without
-admin-tls-* flags the -tls-* flags then apply to that connection.

`

const locksUsage = `Usage: monolockctl locks [FLAGS]

Lists every held lock, sorted by name: its holder (address, and identity
under mutual TLS), fencing token, when it was granted, the lease the holder
asked for, and how many sessions wait in its queue. Idle locks do not exist
on the server and are not listed.

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl locks
  monolockctl locks -match 'nightly/*'
  monolockctl locks -admin 127.0.0.1:7071 -json
`

const lockUsage = `Usage: monolockctl lock [FLAGS] NAME

Shows one lock: its holder, then its queue in FIFO order (the next holder
first), with each waiter's address for 'monolockctl kick'. A lock without a
holder is idle: exit status 3.

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl lock nightly-import
  monolockctl lock nightly/import          # names may contain '/'
  monolockctl lock -json nightly-import
`

const releaseUsage = `Usage: monolockctl release [FLAGS] NAME

Force-releases a lock: the holder gets ERROR 0x02 (closed by administrator)
and its connection is closed; the first waiter, if any, is granted the lock
with a new, larger token. A holder that follows the client rules stops its
work, and writes it still attempts with the old token are rejected by
fenced resources. The audit log records force_release, then released.

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl release nightly-import
  monolockctl release -admin http://127.0.0.1:7071 nightly/import
`

const kickUsage = `Usage: monolockctl kick [FLAGS] NAME REMOTE_ADDR

Removes one waiter from a lock's queue: it gets ERROR 0x02 (closed by
administrator) and is closed; the other waiters keep their order. Take
REMOTE_ADDR from 'monolockctl lock NAME'. The holder cannot be kicked: use
'monolockctl release NAME'.

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl lock nightly-import          # the queue, with the addresses
  monolockctl kick nightly-import 10.0.0.7:51234
`

const whoamiUsage = `Usage: monolockctl whoami [FLAGS]

Shows the identity the admin API sees (that of -admin-tls-cert under mutual
TLS; none without it) and the roles it has: read, release, kick. It needs no
role, so it works with any certificate the server accepts.

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl whoami -admin locks.internal:7071 -admin-tls-ca ca.pem \
    -admin-tls-cert me.pem -admin-tls-key me-key.pem
`

const infoUsage = `Usage: monolockctl info [FLAGS]

Shows the server's version, uptime, effective configuration and counts
(held locks, sessions, waiters).

` + adminFlagsHelp + adminExitStatus + `
Examples:
  monolockctl info
  monolockctl info -json
`

// adminCommand parses the command line of an admin command: its flags (with
// extra ones from more), then exactly the named positional arguments.
func adminCommand(e *env, cmd, text string, args []string, more func(*flag.FlagSet), positional ...string) (*adminFlags, *adminClient, []string, int, bool) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	a := addAdminFlags(fs, e.getenv)
	if more != nil {
		more(fs)
	}
	setUsage(fs, func(flags string) string { return fmt.Sprintf(text, flags, connectTimeout, adminTimeout) })
	if status, ok := parseFlags(fs, args, e); !ok {
		return nil, nil, nil, status, false
	}
	rest := fs.Args()
	if len(rest) < len(positional) {
		return nil, nil, nil, usageError(e, cmd, "missing %s", positional[len(rest)]), false
	}
	if len(rest) > len(positional) {
		extra := rest[len(positional)]
		if strings.HasPrefix(extra, "-") {
			return nil, nil, nil, usageError(e, cmd, "flags go before the arguments (%q after %s)", extra, strings.Join(append([]string{cmd}, positional...), " ")), false
		}
		return nil, nil, nil, usageError(e, cmd, "unexpected argument %q", extra), false
	}
	for i, what := range positional {
		if what == "NAME" {
			if err := protocol.ValidateName(rest[i]); err != nil {
				return nil, nil, nil, usageError(e, cmd, "invalid NAME: %v", err), false
			}
		} else if rest[i] == "" {
			return nil, nil, nil, usageError(e, cmd, "empty %s", what), false
		}
	}
	c, err := a.client()
	if err != nil {
		return nil, nil, nil, usageError(e, cmd, "%v", err), false
	}
	return a, c, rest, 0, true
}

func locksMain(args []string, e *env) int {
	var match optionalString
	a, c, _, status, ok := adminCommand(e, "locks", locksUsage, args, func(fs *flag.FlagSet) {
		fs.Var(&match, "match", "list only the locks whose name matches this `glob`: * matches any run of characters (also '/'), ? one character")
	})
	if !ok {
		return status
	}
	var query url.Values
	if match.set {
		query = url.Values{"match": {match.value}}
	}
	var list admin.LockList
	if status, done := fetch(e, a, c, http.MethodGet, "/api/locks", query, "", &list); done {
		return status
	}
	locks := list.Locks
	if len(locks) == 0 {
		if match.set {
			fmt.Fprintf(e.stdout, "no held lock matches %q\n", match.value)
		} else {
			fmt.Fprintln(e.stdout, "no locks held")
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOLDER\tTOKEN\tSINCE\tLEASE\tWAITERS")
	for _, l := range locks {
		h := l.Holder
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\n", cell(l.Name), holderCell(h.RemoteAddr, h.Identity), h.Token, fmtTime(h.Since), fmtMS(h.LeaseMS), len(l.Waiters))
	}
	_ = tw.Flush()
	return 0
}

func lockMain(args []string, e *env) int {
	a, c, rest, status, ok := adminCommand(e, "lock", lockUsage, args, nil, "NAME")
	if !ok {
		return status
	}
	var l admin.LockInfo
	if status, done := fetch(e, a, c, http.MethodGet, lockPath(rest[0]), nil, idle(rest[0]), &l); done {
		return status
	}
	h := l.Holder
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "lock:\t%s\n", cell(l.Name))
	fmt.Fprintf(tw, "holder:\t%s\n", cell(h.RemoteAddr))
	fmt.Fprintf(tw, "identity:\t%s\n", cell(h.Identity))
	fmt.Fprintf(tw, "token:\t%d\n", h.Token)
	fmt.Fprintf(tw, "since:\t%s (held %v)\n", fmtTime(h.Since), time.Since(h.Since).Round(time.Second))
	fmt.Fprintf(tw, "lease:\t%s\n", fmtMS(h.LeaseMS))
	fmt.Fprintf(tw, "waiters:\t%d\n", len(l.Waiters))
	_ = tw.Flush()
	if len(l.Waiters) == 0 {
		return 0
	}
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tWAITER\tIDENTITY\tQUEUED")
	for i, w := range l.Waiters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, cell(w.RemoteAddr), cell(w.Identity), fmtTime(w.QueuedAt))
	}
	_ = tw.Flush()
	return 0
}

// idle is what lock and release say when the API finds no such lock.
func idle(name string) string {
	return fmt.Sprintf("lock %q is idle (no holder, no waiters): check the name, or list the held locks with: monolockctl locks", name)
}

// shellWord quotes s for a command line a person may paste, when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func releaseMain(args []string, e *env) int {
	a, c, rest, status, ok := adminCommand(e, "release", releaseUsage, args, nil, "NAME")
	if !ok {
		return status
	}
	var r admin.ReleaseResponse
	if status, done := fetch(e, a, c, http.MethodPost, lockPath(rest[0])+"/release", nil, idle(rest[0]), &r); done {
		return status
	}
	fmt.Fprintf(e.stdout, "released lock %s: its holder (token %d) got ERROR 0x02 and was closed; the first waiter, if any, now holds it\n", cell(r.Lock), r.ReleasedToken)
	return 0
}

func kickMain(args []string, e *env) int {
	a, c, rest, status, ok := adminCommand(e, "kick", kickUsage, args, nil, "NAME", "REMOTE_ADDR")
	if !ok {
		return status
	}
	var k admin.KickResponse
	if status, done := fetch(e, a, c, http.MethodDelete, lockPath(rest[0])+"/waiters/"+pathSegment(rest[1]), nil,
		fmt.Sprintf("lock %q has no waiter at %s: use an address from the WAITER column of: monolockctl lock %s", rest[0], cell(rest[1]), shellWord(rest[0])), &k); done {
		return status
	}
	fmt.Fprintf(e.stdout, "kicked %s from the queue of lock %s: it got ERROR 0x02 and was closed\n", cell(k.Kicked), cell(k.Lock))
	return 0
}

func infoMain(args []string, e *env) int {
	a, c, _, status, ok := adminCommand(e, "info", infoUsage, args, nil)
	if !ok {
		return status
	}
	var in admin.ServerInfo
	if status, done := fetch(e, a, c, http.MethodGet, "/api/info", nil, "", &in); done {
		return status
	}
	cfg := in.Config
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"version", cell(in.Version)},
		{"uptime", fmtMS(in.UptimeMS / 1000 * 1000)},
		{"listen", cell(cfg.Listen)},
		{"ops listen", orOff(cfg.OpsListen)},
		{"tls", onOff(cfg.TLS)},
		{"mutual tls", onOff(cfg.MTLS)},
		{"acl file", orOff(cfg.ACLFile)},
		{"audit log", orOff(cfg.AuditLog)},
		{"io timeout", fmtMS(cfg.IOTimeoutMS)},
		{"locks held", fmt.Sprint(in.Locks)},
		{"sessions", fmt.Sprint(in.Sessions)},
		{"waiters", fmt.Sprint(in.Waiters)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	for _, kv := range haRows(in.HA) {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	_ = tw.Flush()
	return 0
}

// haRows are info's lines on failover through etcd: "ha: off" on a server
// without it, else the node's role and its cluster, so that an operator sees
// which node leads without the console.
func haRows(ha *admin.HAInfo) [][2]string {
	if ha == nil {
		return [][2]string{{"ha", "off"}}
	}
	role := ha.Role
	switch {
	case ha.Role == "leader" && ha.Serving:
		role = "leader, serving"
	case ha.Role == "leader":
		role = "leader, waiting out the longest lease before serving"
	}
	return [][2]string{
		{"ha", role},
		{"ha leader", cell(ha.Leader)},
		{"ha cluster", cell(ha.Cluster)},
		{"ha ttl", fmtMS(ha.TTLMS)},
		{"ha terms won", fmt.Sprint(ha.Terms)},
	}
}

// optionalString is a string flag that knows whether it was given, so that
// an empty -match reaches the API (which rejects it) instead of meaning "all".
type optionalString struct {
	value string
	set   bool
}

func (o *optionalString) String() string { return o.value }
func (o *optionalString) Set(s string) error {
	o.value, o.set = s, true
	return nil
}

func whoamiMain(args []string, e *env) int {
	a, c, _, status, ok := adminCommand(e, "whoami", whoamiUsage, args, nil)
	if !ok {
		return status
	}
	var w admin.WhoAmI
	if status, done := fetch(e, a, c, http.MethodGet, "/api/whoami", nil, "", &w); done {
		return status
	}
	roles := "none"
	if len(w.Roles) > 0 {
		roles = strings.Join(w.Roles, ", ")
	}
	identity := cell(w.Identity)
	if w.Identity == "" {
		identity = "- (no mutual TLS on the admin port: every caller has every role)"
		if len(w.Roles) == 0 {
			identity = "- (the certificate names no identity)"
		}
	}
	fmt.Fprintf(e.stdout, "identity: %s\nroles:    %s\n", identity, roles)
	return 0
}
