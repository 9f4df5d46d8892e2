package haetcd_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/monolock/monolock/internal/haetcd"
	"github.com/monolock/monolock/internal/testsupport/testetcd"
	"github.com/monolock/monolock/locktable"
)

// The etcd side against a real etcd, with a fake loop that records what it
// is told: elected, keepalives, token blocks, max-lease, lost. The loop's
// rules are tested in eventloop (testdata/rules/ha.txt); here, what reaches
// etcd and comes back, and an etcd or a loop that does not answer.

// event is one call into the fake loop.
type event struct {
	kind     string // elected, keepalive, block, max-lease, lost
	term     uint64
	lo, hi   uint64
	ms       uint32
	why      string
	sentAt   time.Time
	maxLease uint32
	credit   uint32
	atElect  string // what the fake loop's atElected read when it was elected
}

// fakeLoop records the calls; while stuck, HAElected waits for its
// context, as a loop that does not serve its calls.
type fakeLoop struct {
	events chan event
	stuck  atomic.Bool
	// atElected, when set, runs inside HAElected: what etcd holds as the
	// loop is told it leads.
	atElected func() string
}

func newFakeLoop() *fakeLoop { return &fakeLoop{events: make(chan event, 1024)} }

func (l *fakeLoop) HAElected(ctx context.Context, term uint64, _, sentAt time.Time, maxLeaseMS, creditMS uint32) error {
	if l.stuck.Load() {
		l.events <- event{kind: "elected-unanswered", term: term}
		<-ctx.Done()
		return ctx.Err()
	}
	e := event{kind: "elected", term: term, sentAt: sentAt, maxLease: maxLeaseMS, credit: creditMS}
	if l.atElected != nil {
		e.atElect = l.atElected()
	}
	l.events <- e
	return nil
}

func (l *fakeLoop) HAKeepalive(_ context.Context, term uint64, sentAt time.Time) error {
	l.events <- event{kind: "keepalive", term: term, sentAt: sentAt}
	return nil
}

func (l *fakeLoop) HATokenBlock(_ context.Context, term, lo, hi uint64) error {
	l.events <- event{kind: "block", term: term, lo: lo, hi: hi}
	return nil
}

func (l *fakeLoop) HAMaxLease(_ context.Context, term uint64, ms uint32) error {
	l.events <- event{kind: "max-lease", term: term, ms: ms}
	return nil
}

func (l *fakeLoop) HALost(_ context.Context, term uint64, why string) error {
	l.events <- event{kind: "lost", term: term, why: why}
	return nil
}

// await returns the next event of kind, skipping keepalives unless asked
// for; a safety deadline fails the test.
func (l *fakeLoop) await(t *testing.T, kind string) event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-l.events:
			if e.kind == kind {
				return e
			}
			if e.kind != "keepalive" {
				t.Fatalf("got %+v while waiting for %s", e, kind)
			}
		case <-deadline:
			t.Fatalf("no %s within 30s", kind)
		}
	}
}

// runNode runs a node of cluster "t" until the test ends; edits change its
// configuration first.
func runNode(t *testing.T, etcd *testetcd.Server, loop haetcd.Loop, edits ...func(*haetcd.Config)) *haetcd.Node {
	t.Helper()
	cfg := haetcd.Config{Endpoints: []string{etcd.Endpoint}, Cluster: "t", TTL: 2 * time.Second, Name: "node-a 127.0.0.1:7070", Logger: zerolog.Nop()}
	for _, edit := range edits {
		edit(&cfg)
	}
	n, err := haetcd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx, loop)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = n.Close()
	})
	return n
}

func client(t *testing.T, etcd *testetcd.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func value(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := cli.Get(ctx, key)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("%s: %v %v", key, got, err)
	}
	return string(got.Kvs[0].Value)
}

func TestNodeLeadsAndReserves(t *testing.T) {
	etcd := testetcd.Start(t)
	cli := client(t, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A ceiling far above the clock rule's: the first block starts above it.
	high := uint64(1) << 63
	if _, err := cli.Put(ctx, "/monolock/t/tokens", strconv.FormatUint(high, 10)); err != nil {
		t.Fatal(err)
	}
	loop := newFakeLoop()
	n := runNode(t, etcd, loop)
	elected := loop.await(t, "elected")
	if elected.term != 1 || elected.maxLease != 0 || elected.credit != 0 || elected.sentAt.IsZero() {
		t.Fatalf("elected %+v", elected)
	}
	ka := loop.await(t, "keepalive")
	if ka.term != 1 || !ka.sentAt.After(elected.sentAt) {
		t.Fatalf("keepalive %+v after election %+v", ka, elected)
	}
	n.NeedTokenBlock(1)
	b := loop.await(t, "block")
	if b.lo != high+1 || b.hi != high+1+locktable.BlockSize {
		t.Fatalf("block [%d, %d), want [%d, ...)", b.lo, b.hi, high+1)
	}
	if got := value(t, cli, "/monolock/t/tokens"); got != strconv.FormatUint(b.hi-1, 10) {
		t.Fatalf("stored ceiling %s, want %d", got, b.hi-1)
	}
	n.NeedTokenBlock(1)
	if next := loop.await(t, "block"); next.lo != b.hi {
		t.Fatalf("next block starts at %d, want %d", next.lo, b.hi)
	}
	n.NeedMaxLease(1, 1500)
	if m := loop.await(t, "max-lease"); m.ms != 1500 || value(t, cli, "/monolock/t/max-lease") != "1500" {
		t.Fatalf("max-lease %+v, stored %s", m, value(t, cli, "/monolock/t/max-lease"))
	}
	if n.Leader() != "node-a 127.0.0.1:7070" {
		t.Fatalf("observed leader %q", n.Leader())
	}
}

// A reservation after the node's leader key is gone fails, and the loop is
// told the term is lost.
func TestReservationWithoutTheLeaderKeyLosesTheTerm(t *testing.T) {
	etcd := testetcd.Start(t)
	cli := client(t, etcd)
	loop := newFakeLoop()
	n := runNode(t, etcd, loop)
	loop.await(t, "elected")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, "/monolock/t/leader/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	n.NeedTokenBlock(1)
	lost := loop.await(t, "lost")
	if lost.term != 1 || !strings.Contains(lost.why, "not the leader") {
		t.Fatalf("lost %+v", lost)
	}
	// It campaigns again and leads a new term.
	if again := loop.await(t, "elected"); again.term != 2 {
		t.Fatalf("elected again %+v", again)
	}
}

// A dead etcd: the reservation the loop asks for is bounded, and ends the
// term (the loop's own deadline would end it anyway).
func TestDeadEtcdLosesTheTerm(t *testing.T) {
	etcd := testetcd.Start(t)
	loop := newFakeLoop()
	n := runNode(t, etcd, loop)
	loop.await(t, "elected")
	etcd.Kill()
	n.NeedTokenBlock(1)
	if lost := loop.await(t, "lost"); lost.term != 1 {
		t.Fatalf("lost %+v", lost)
	}
}

// A loop that does not take the election in time: the node resigns and
// campaigns again, with the next term's number.
func TestStuckLoopResigns(t *testing.T) {
	etcd := testetcd.Start(t)
	loop := newFakeLoop()
	loop.stuck.Store(true)
	runNode(t, etcd, loop)
	if e := loop.await(t, "elected-unanswered"); e.term != 1 {
		t.Fatalf("first election %+v", e)
	}
	loop.stuck.Store(false)
	if e := loop.await(t, "elected"); e.term != 2 {
		t.Fatalf("after a stuck loop: %+v", e)
	}
}

// The test-only wall-clock offset moves the clock reading a term's first
// block starts above (the rule for a cluster moved from clock tokens): an
// hour back, the block starts at that hour's second.
func TestWallClockOffsetMovesTheFirstBlock(t *testing.T) {
	etcd := testetcd.Start(t)
	loop := newFakeLoop()
	n := runNode(t, etcd, loop, func(c *haetcd.Config) {
		c.TestWallClockOffset = func() time.Duration { return -time.Hour }
	})
	loop.await(t, "elected")
	before := time.Now().Add(-time.Hour).Unix()
	n.NeedTokenBlock(1)
	b := loop.await(t, "block")
	after := time.Now().Add(-time.Hour).Unix()
	if s := int64(b.lo >> 32); s < before || s > after {
		t.Fatalf("first block at second %d, want %d..%d (an hour back)", s, before, after)
	}
}

// min-ttl: a node elected in a cluster without it (led only by servers that
// gave their key up at once) gets no credit, and writes its TTL before the
// loop is told it leads; a stored TTL above its own is lowered to it, one
// below is kept, and the credit is 0.2 × the smaller.
func TestMinTTLAndTheCredit(t *testing.T) {
	for _, c := range []struct {
		name, stored string
		maxLease     uint32
		credit       uint32
		after        string
	}{
		{name: "absent", stored: "", credit: 0, after: "2000"},
		{name: "larger", stored: "5000", maxLease: 3000, credit: 400, after: "2000"},
		{name: "smaller", stored: "1500", maxLease: 3000, credit: 300, after: "1500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			etcd := testetcd.Start(t)
			cli := client(t, etcd)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c.stored != "" {
				if _, err := cli.Put(ctx, "/monolock/t/min-ttl", c.stored); err != nil {
					t.Fatal(err)
				}
			}
			if c.maxLease != 0 {
				if _, err := cli.Put(ctx, "/monolock/t/max-lease", strconv.FormatUint(uint64(c.maxLease), 10)); err != nil {
					t.Fatal(err)
				}
			}
			loop := newFakeLoop()
			loop.atElected = func() string { return value(t, cli, "/monolock/t/min-ttl") }
			runNode(t, etcd, loop)
			e := loop.await(t, "elected")
			if e.maxLease != c.maxLease || e.credit != c.credit || e.atElect != c.after {
				t.Fatalf("elected with max-lease %d, credit %d, min-ttl %q in etcd; want %d, %d, %q", e.maxLease, e.credit, e.atElect, c.maxLease, c.credit, c.after)
			}
		})
	}
}

// A min-ttl that is not a TTL stops the election, saying how to repair it.
func TestMinTTLNotANumberIsRefused(t *testing.T) {
	etcd := testetcd.Start(t)
	cli := client(t, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/monolock/t/min-ttl", "soon"); err != nil {
		t.Fatal(err)
	}
	loop := newFakeLoop()
	runNode(t, etcd, loop)
	watch := cli.Watch(ctx, "/monolock/t/leader", clientv3.WithPrefix())
	// The node wins, reads min-ttl, gives the key up at once, and campaigns
	// again: a put and a delete of its leader key, and never an election.
	for puts, deletes := 0, 0; puts < 2 || deletes < 2; {
		select {
		case resp := <-watch:
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					puts++
				} else {
					deletes++
				}
			}
		case e := <-loop.events:
			t.Fatalf("the loop was told %+v", e)
		case <-ctx.Done():
			t.Fatal("not two campaigns within 30s")
		}
	}
}

// The give-up is held: once the loop ends its term, the leader key stays
// until 0.2 × TTL after that (TTL 2s: 400ms), then goes, and the node
// campaigns again. The hold is in the test's hand.
func TestGiveUpWaitsAFifthOfTheTTL(t *testing.T) {
	etcd := testetcd.Start(t)
	cli := client(t, etcd)
	loop := newFakeLoop()
	held := make(chan time.Time, 1)
	release := make(chan struct{})
	n := runNode(t, etcd, loop)
	haetcd.SetSleepUntil(n, func(until time.Time) {
		held <- until
		<-release
	})
	loop.await(t, "elected")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	n.TermEnded(1, "the leader's deadline passed")
	after := time.Now()
	var until time.Time
	select {
	case until = <-held:
	case <-ctx.Done():
		t.Fatal("the give-up was not held")
	}
	if until.Before(before.Add(400*time.Millisecond)) || until.After(after.Add(400*time.Millisecond)) {
		t.Fatalf("held until %v, want 400ms after the term ended (between %v and %v)", until, before, after)
	}
	got, err := cli.Get(ctx, "/monolock/t/leader", clientv3.WithPrefix())
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("while held, the leader key: %v %v; want it kept", got, err)
	}
	watch := cli.Watch(ctx, "/monolock/t/leader", clientv3.WithPrefix(), clientv3.WithRev(got.Header.Revision+1))
	close(release)
	for deleted := false; !deleted; {
		select {
		case resp := <-watch:
			for _, ev := range resp.Events {
				deleted = deleted || ev.Type == clientv3.EventTypeDelete
			}
		case <-ctx.Done():
			t.Fatal("the leader key was not given up once the hold was over")
		}
	}
	if e := loop.await(t, "elected"); e.term != 2 || e.credit != 400 {
		t.Fatalf("elected again %+v, want term 2 with credit 400ms", e)
	}
}
