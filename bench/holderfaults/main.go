// Command holderfaults is the holder fault harness of monolock (`make
// holder-faults`): does the old holder stop before the next one starts?
//
// It starts bin/monolock on a free loopback port with the admin API, and a
// fenced resource (a TCP service in this process) that records every write
// with its holder, its token and its time of arrival, and rejects a token
// smaller than the largest it has accepted for that lock. Each round of a
// scenario uses a lock of its own: an old holder takes the lock and writes
// every 5 ms, a next holder queues behind it, then the scenario's fault hits
// the old holder: a link frozen one way or both (internal/testsupport/
// faultproxy), a SIGSTOP of its process (the Go holder, or monolockctl), a
// force release through the admin
// API, SIGHUP or SIGKILL to monolockctl, a closed stderr (SIGPIPE), a COMMAND
// that ignores SIGTERM, or one that leaves its writer in the background. The
// next holder writes for 100 ms and releases.
//
// Holders are processes of this same binary: "hold" uses client.Do and
// checks Lock.Valid before each write; "write" is COMMAND under
// `monolockctl run` and writes with MONOLOCK_TOKEN.
//
// For every round the report takes the old holder's last write and the next
// holder's first, as the resource received them (one mutex, one clock): an
// overlap is a last old write after the first next one. The table gives, per
// scenario, the rounds, the overlaps and the longest, the shortest gap between
// the old holder's last write and the next's first in the other rounds (the
// margin that was left), the old writes that
// arrived after the next holder's first, and how many of those the fence
// accepted (it must be none). Every scenario but the force release must show
// no overlap; a force release hands the lock on at once by design, and only
// the fencing token protects the resource there.
//
// With -store postgres or -store mariadb the resource's fence is a real
// database (internal/testsupport/fencedb, a throwaway server on a port picked
// at run time): every admitted write is a transaction that runs fence.Admit
// and inserts one row, and the two last columns are read from those rows
// afterwards. A stale attempt carries a token below one the resource had
// admitted for the lock; a stale write landed is a row whose token is below
// one that landed earlier for the lock, in the database's commit order.
//
// Everything stays on loopback, every wait is bounded, and every process is
// killed at the end of its round. The exit status is 1 when a scenario that
// must not overlap did, or the fence accepted a stale write; 2 when the
// harness itself failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monolock/monolock/internal/testsupport/fenced"
	"github.com/monolock/monolock/internal/testsupport/fencedb"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// harness is one run.
type harness struct {
	self, ctl string
	srv       *proc.Process
	res       *resource
	lease     time.Duration
	patience  time.Duration
	dir       string
	all       []scenario
}

func (h *harness) index(sc scenario) int {
	for i, s := range h.all {
		if s.name == sc.name {
			return i
		}
	}
	return -1
}

func main() {
	switch {
	case len(os.Args) > 1 && os.Args[1] == "write":
		os.Exit(writeMain(os.Args[2:]))
	case len(os.Args) > 1 && os.Args[1] == "hold":
		os.Exit(holdMain(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	server := flag.String("server", "../bin/monolock", "the monolock binary")
	ctl := flag.String("ctl", "../bin/monolockctl", "the monolockctl binary")
	rounds := flag.Int("rounds", 20, "rounds per scenario")
	lease := flag.Duration("lease", 500*time.Millisecond, "lease of every holder")
	only := flag.String("only", "", "run only the scenarios whose name contains this")
	keep := flag.Bool("keep", false, "keep the holders' logs")
	storeFlag := flag.String("store", "memory", "where the fenced writes land: memory, postgres or mariadb")
	flag.Parse()
	kind, err := fencedb.ParseKind(*storeFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderfaults: -store:", err)
		return 2
	}

	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderfaults:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "holderfaults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderfaults:", err)
		return 2
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	srv, err := proc.Monolock(*server, proc.Options{
		Args:    []string{"-admin-listen", "127.0.0.1:0", "-log-level", "info"},
		LogFile: filepath.Join(dir, "server.log"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderfaults: starting the server:", err)
		return 2
	}
	defer srv.Kill()
	var opts fenced.Options
	var store *fencedb.Store
	if kind != fencedb.Memory {
		if store, err = fencedb.Start(kind); err != nil {
			fmt.Fprintln(os.Stderr, "holderfaults: starting the database:", err)
			return 2
		}
		defer store.Close()
		defer store.CloseOnSignal("holderfaults")()
		opts.Store = store
	}
	res, err := startResource(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderfaults:", err)
		return 2
	}
	defer res.close()
	absCtl, _ := filepath.Abs(*ctl)
	h := &harness{self: self, ctl: absCtl, srv: srv, res: res, lease: *lease,
		patience: 10*(*lease) + 5*time.Second, dir: dir, all: scenarios()}

	fmt.Printf("holderfaults: %d rounds per scenario, lease %v, server %s, store %s (logs in %s)\n", *rounds, *lease, srv.Addr, kind, dir)
	start := time.Now()
	fmt.Println("| scenario | rounds | overlaps | longest overlap | shortest gap | old writes after the next's first | of those accepted | stale attempts | stale writes landed |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	bad := false
	for _, sc := range h.all {
		if *only != "" && !strings.Contains(sc.name, *only) {
			continue
		}
		var overlaps, after, accepted, inProgress int
		var longest time.Duration
		shortest := time.Duration(-1) // no round without overlap yet
		for i := range *rounds {
			ho, err := h.round(sc, i)
			if err != nil {
				fmt.Fprintf(os.Stderr, "holderfaults: %s, round %d: %v\n", sc.name, i, err)
				return 2
			}
			switch {
			case ho.overlap > 0 && sc.paused && ho.oldAfter == 1:
				inProgress++ // the write the pause caught between check and send
				longest = max(longest, ho.overlap)
			case ho.overlap > 0:
				overlaps++
				longest = max(longest, ho.overlap)
			case shortest < 0 || ho.gap < shortest:
				shortest = ho.gap
			}
			after += ho.oldAfter
			accepted += ho.staleAccepted
		}
		prefix := h.lockPrefix(sc)
		attempts := res.staleAttempts(prefix)
		landed, err := staleLanded(res, store, prefix)
		if err != nil {
			fmt.Fprintf(os.Stderr, "holderfaults: %s: %v\n", sc.name, err)
			return 2
		}
		if accepted > 0 || landed > 0 || (!sc.forced && overlaps > 0) {
			bad = true
		}
		over := fmt.Sprint(overlaps)
		if inProgress > 0 {
			over += fmt.Sprintf(" (+%d write in progress at the pause)", inProgress)
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %d | %d | %d | %d |\n", sc.name, *rounds, over, fmtOverlap(longest), fmtOverlap(max(shortest, 0)), after, accepted, attempts, landed)
	}
	fmt.Printf("holderfaults: done in %v\n", time.Since(start).Round(time.Second))
	if bad {
		fmt.Println("holderfaults: FAILED: an overlap where none may be, or a stale write accepted")
		return 1
	}
	return 0
}

// staleLanded counts the stale writes that landed on the locks named
// prefix…: from the database's rows when there is one, else from the
// resource's record.
func staleLanded(res *resource, store *fencedb.Store, prefix string) (int, error) {
	if store == nil {
		return res.staleAccepted(prefix), nil
	}
	landed, err := store.Landed(context.Background())
	if err != nil {
		return 0, err
	}
	n := 0
	for lock, l := range landed {
		if strings.HasPrefix(lock, prefix) {
			n += l.Stale
		}
	}
	return n, nil
}

func fmtOverlap(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return d.Round(10 * time.Microsecond).String()
}
