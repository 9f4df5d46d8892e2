// Package haetcd is a monolock node's side of failover through etcd, as
// Patroni does it for PostgreSQL: it campaigns for leadership of a cluster
// under /monolock/NAME/ with an etcd lease of a few seconds, keeps the lease
// alive, and, while it leads, reserves token blocks and writes the largest
// lease granted, each in a transaction guarded by its leader key. It runs
// beside the event loop, never in it: it tells the loop what happened
// through the Loop it is given (the server's control connection), and the
// loop asks it for what it needs through Node's Need* methods, which never
// wait. The rules (the leader's deadline, the new leader's wait, tokens
// only from blocks) are the loop's (eventloop, ha.go); this package only
// talks to etcd, each call bounded by a deadline.
//
// Keys, under /monolock/NAME/:
//
//	leader/<lease id>  the election (concurrency.Election): the value is the node's name
//	tokens             the ceiling of the last reserved token block (decimal uint64)
//	max-lease          the largest lease any leader granted, in ms (decimal)
//	min-ttl            the smallest TTL any leader led with, in ms (decimal)
//
// The new leader's wait is shortened by 0.2 × min-ttl (its credit, see
// eventloop, ha.go), which holds only if every old term ended with at least
// 0.2 × its leader's TTL between the loop's last answer and the moment
// another node could win: by the lease's expiry (0.2 × TTL after the
// loop's deadline), or by a give-up (resign, revoke) this package makes
// only 0.2 × TTL after the loop ended the term (holdKey).
package haetcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/monolock/monolock/locktable"
)

// Loop is the event loop as this package sees it: the server's HA methods
// (eventloop, ha_calls.go). Each is a call into the loop that either runs or
// fails; ctx bounds the wait.
type Loop interface {
	HAElected(ctx context.Context, term uint64, wonAt, sentAt time.Time, maxLeaseMS, creditMS uint32) error
	HAKeepalive(ctx context.Context, term uint64, sentAt time.Time) error
	HATokenBlock(ctx context.Context, term, lo, hi uint64) error
	HAMaxLease(ctx context.Context, term uint64, ms uint32) error
	HALost(ctx context.Context, term uint64, why string) error
}

// Config says which cluster a node belongs to and how it reaches etcd.
type Config struct {
	Endpoints []string      // etcd client URLs
	Cluster   string        // keys live under /monolock/Cluster/
	TTL       time.Duration // the lease's TTL: whole seconds, at least MinTTL
	Name      string        // this node's election value: what followers show as the leader
	TLS       *tls.Config   // nil: plain HTTP to etcd
	Logger    zerolog.Logger
	// TestWallClockOffset, when set, is added to the clock reading a
	// term's first token block starts above (locktable.NextBlock): for
	// tests only, with eventloop.Config's of the same name, to step a
	// node's wall clock without stepping the machine's. Nil on a real
	// server.
	TestWallClockOffset func() time.Duration
}

// MinTTL is the shortest lease TTL: the leader serves 0.8 × TTL past its
// newest answered keepalive, and keepalives go every TTL/4.
const MinTTL = 2 * time.Second

// DefaultTTL is the lease TTL unless told otherwise.
const DefaultTTL = 5 * time.Second

// Keys of a cluster.
func leaderPrefix(cluster string) string { return "/monolock/" + cluster + "/leader" }
func tokensKey(cluster string) string    { return "/monolock/" + cluster + "/tokens" }
func maxLeaseKey(cluster string) string  { return "/monolock/" + cluster + "/max-lease" }
func minTTLKey(cluster string) string    { return "/monolock/" + cluster + "/min-ttl" }

// Node is one node's etcd side. Its Need* methods are the loop's requests
// (eventloop.HACoordinator); Run serves them.
type Node struct {
	cfg Config
	log zerolog.Logger
	cli *clientv3.Client

	leader atomic.Pointer[string] // the leader's name as last observed; "" for none

	mu      sync.Mutex // guards the requests below
	block   uint64     // a block is asked for this term (0: none)
	lease   uint32     // the largest max-lease asked for
	leaseOf uint64     // the term it was asked for
	ended   uint64     // the loop ended this term
	endedAt time.Time  // when: the loop answers nothing of the term after it
	why     string
	nudge   chan struct{} // cap 1: a request arrived

	// sleepUntil waits until t: a timer, or a test's hand (export_test.go).
	sleepUntil func(t time.Time)
}

// New connects a client to etcd (lazily: nothing waits here).
func New(cfg Config) (*Node, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.TTL,
		TLS:         cfg.TLS,
		Logger:      zap.NewNop(), // its lines are not ours; errors come back as errors
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, cli: cli, nudge: make(chan struct{}, 1), sleepUntil: sleepUntil}
	none := ""
	n.leader.Store(&none)
	return n, nil
}

// Close closes the etcd client; Run must have returned.
func (n *Node) Close() error { return n.cli.Close() }

// Leader is the leader's name as last observed, "" when none is known.
func (n *Node) Leader() string { return *n.leader.Load() }

// Name is this node's election value.
func (n *Node) Name() string { return n.cfg.Name }

// NeedTokenBlock is the loop asking for the next token block of term.
func (n *Node) NeedTokenBlock(term uint64) {
	n.mu.Lock()
	n.block = term
	n.mu.Unlock()
	n.poke()
}

// NeedMaxLease is the loop asking that max-lease be at least ms in term.
func (n *Node) NeedMaxLease(term uint64, ms uint32) {
	n.mu.Lock()
	if n.leaseOf != term {
		n.leaseOf, n.lease = term, 0
	}
	n.lease = max(n.lease, ms)
	n.mu.Unlock()
	n.poke()
}

// TermEnded is the loop saying it ended term; it is called on the loop, so
// the loop answers nothing of the term after now.
func (n *Node) TermEnded(term uint64, why string) {
	now := time.Now()
	n.mu.Lock()
	n.ended, n.endedAt, n.why = term, now, why
	n.mu.Unlock()
	n.poke()
}

func (n *Node) poke() {
	select {
	case n.nudge <- struct{}{}:
	default:
	}
}

// requests takes the loop's requests for term; ended says the loop ended
// it, at endedAt.
func (n *Node) requests(term uint64) (block bool, lease uint32, ended bool, endedAt time.Time, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	block = n.block == term
	n.block = 0
	if n.leaseOf == term {
		lease = n.lease
	}
	return block, lease, n.ended == term, n.endedAt, n.why
}

// opTimeout bounds every etcd call: a third of the TTL, so that a stuck
// etcd is noticed well within the leader's deadline.
func (n *Node) opTimeout() time.Duration { return n.cfg.TTL / 3 }

// Run campaigns, leads and campaigns again until ctx ends. It returns nil
// then; every failure on the way is logged and followed by a new campaign.
func (n *Node) Run(ctx context.Context, loop Loop) error {
	var term uint64
	retry := time.Duration(0)
	for ctx.Err() == nil {
		began := time.Now()
		won, err := n.campaignAndLead(ctx, loop, term+1)
		if won {
			term++
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			n.log.Warn().Err(err).Msg("ha: etcd: campaigning again")
		}
		// A term that lasted is followed by a campaign at once; an etcd
		// that refuses, or a term that ends as it begins (a lock port that
		// cannot be opened), is retried after a growing pause, up to TTL/2.
		retry = min(max(2*retry, 100*time.Millisecond), n.cfg.TTL/2)
		if won && time.Since(began) >= n.cfg.TTL {
			retry = 0
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// campaignAndLead runs one lease: it campaigns with it, and once elected
// leads as term until the loop or etcd ends the term. won says whether it
// was elected (and the loop told so).
//
// The leadership is given up early (resign, revoke) only once the loop has
// certainly ended the term: it did so itself, or it took HALost. Else the
// loop may still grant until its deadline, and a node elected meanwhile
// would not wait for those grants' leases; so the lease is left to expire
// in etcd, which it does after the loop's deadline (see eventloop, ha.go).
// And even then, only 0.2 × TTL after the loop's last answer (holdKey): the
// next leader's wait is shortened by that much. A lease the loop never led
// with (the election not yet told to it, or the call that tells it failed,
// so never ran) is given up at once: the loop's last answer, in an earlier
// term, was followed by such a hold or an expiry already.
func (n *Node) campaignAndLead(ctx context.Context, loop Loop, term uint64) (won bool, err error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ttl := int64(n.cfg.TTL / time.Second)
	gctx, gcancel := context.WithTimeout(lctx, n.opTimeout())
	sentAt := time.Now()
	grant, err := n.cli.Grant(gctx, ttl)
	gcancel()
	if err != nil {
		return false, fmt.Errorf("grant a lease of %ds: %w", ttl, err)
	}
	giveUp := true           // resign and revoke at the end, unless the loop may still lead
	var lastAnswer time.Time // the loop's last answer with this lease; zero: it never led with it
	var e *concurrency.Election
	defer func() {
		if giveUp {
			n.holdKey(lastAnswer)
			if e != nil {
				n.resign(e)
			}
			n.revoke(grant.ID)
		}
	}()
	sess, err := concurrency.NewSession(n.cli, concurrency.WithLease(grant.ID), concurrency.WithContext(lctx))
	if err != nil {
		return false, fmt.Errorf("keep lease %x alive: %w", grant.ID, err)
	}
	defer sess.Orphan() // its keepalives stop; the lease is revoked, or left to expire

	ka := &keepalive{newest: sentAt, lost: make(chan error, 1)}
	go n.keepAlive(lctx, grant.ID, ka, loop)

	e = concurrency.NewElection(sess, leaderPrefix(n.cfg.Cluster))
	go n.observe(lctx, e)
	campaigned := make(chan error, 1)
	go func() { campaigned <- e.Campaign(lctx, n.cfg.Name) }()
	select {
	case err = <-campaigned:
	case err = <-ka.lost:
		cancel()
		<-campaigned
	}
	if err != nil {
		return false, fmt.Errorf("campaign: %w", err)
	}
	wonAt := time.Now()
	w, err := n.readWait(lctx)
	if err == nil {
		err = n.recordMinTTL(lctx, e, w)
	}
	if err != nil {
		return false, err
	}
	credit := w.credit(n.cfg.TTL)
	ka.elected(term)
	cctx, ccancel := context.WithTimeout(lctx, n.opTimeout())
	err = loop.HAElected(cctx, term, wonAt, ka.newestSent(), w.maxLease, credit)
	ccancel()
	if err != nil { // the call never ran: the loop does not lead
		return true, fmt.Errorf("tell the event loop it leads: %w", err)
	}
	n.log.Info().Uint64("term", term).Str("name", n.cfg.Name).Uint32("max_lease_ms", w.maxLease).Uint32("credit_ms", credit).Msg("ha: etcd: elected")
	var ended bool
	ended, lastAnswer, err = n.lead(lctx, loop, term, e, ka, w.maxLease)
	if giveUp = ended; !ended {
		n.log.Warn().Uint64("term", term).Msg("ha: etcd: the event loop did not take the end of the term; the lease is left to expire after its deadline")
	}
	return true, err
}

// holdKey waits until 0.2 × TTL has passed since lastAnswer (not at all
// when it is zero), whatever the node's context says: a shutdown that
// cannot wait that long leaves the lease to expire (cmd/monolock stops
// waiting for Run at its grace), which is as safe.
func (n *Node) holdKey(lastAnswer time.Time) {
	if lastAnswer.IsZero() {
		return
	}
	until := lastAnswer.Add(n.cfg.TTL / creditShare)
	if time.Now().Before(until) {
		n.sleepUntil(until)
	}
}

// creditShare: a leader keeps its key 1/creditShare (0.2) of its TTL after
// its loop's last answer, and a new leader's wait is shortened by as much
// of the smallest TTL any leader led with.
const creditShare = 5

func sleepUntil(t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	<-timer.C
}

// lead serves the loop's requests of term until the term ends. ended says
// whether the loop has certainly ended the term (see campaignAndLead), and
// lastAnswer when it did at the latest: it answered nothing of the term
// after it.
func (n *Node) lead(ctx context.Context, loop Loop, term uint64, e *concurrency.Election, ka *keepalive, maxLease uint32) (ended bool, lastAnswer time.Time, err error) {
	first := true
	stored := maxLease
	for {
		block, lease, loopEnded, endedAt, why := n.requests(term)
		if loopEnded {
			return true, endedAt, fmt.Errorf("the event loop ended term %d: %s", term, why)
		}
		if block {
			err = n.reserve(ctx, loop, term, e, first)
			first = false
		}
		if err == nil && lease > stored {
			if err = n.writeMaxLease(ctx, loop, term, e, lease); err == nil {
				stored = lease
			}
		}
		if err != nil {
			ended, lastAnswer = n.lost(loop, term, err.Error())
			return ended, lastAnswer, err
		}
		select {
		case <-n.nudge:
		case err := <-ka.lost:
			ended, lastAnswer = n.lost(loop, term, err.Error())
			return ended, lastAnswer, err
		case <-ctx.Done(): // the node stops: its server has stopped granting already
			return true, time.Now(), nil
		}
	}
}

// lost tells the loop that term is over; taken is false when the loop did
// not take it (then its own deadline ends the term), else endedAt is a
// moment after the loop ended it.
func (n *Node) lost(loop Loop, term uint64, why string) (taken bool, endedAt time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), n.opTimeout())
	defer cancel()
	if err := loop.HALost(ctx, term, why); err != nil {
		n.log.Warn().Err(err).Msg("ha: etcd: could not tell the event loop its term is lost; its deadline ends it")
		return false, time.Time{}
	}
	return true, time.Now()
}

// leaderGuard holds while e's key is still this node's leader key.
func leaderGuard(e *concurrency.Election) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
}

// reserve reserves the next token block in etcd and hands it to the loop.
func (n *Node) reserve(ctx context.Context, loop Loop, term uint64, e *concurrency.Election, first bool) error {
	c, cancel := context.WithTimeout(ctx, n.opTimeout())
	defer cancel()
	key := tokensKey(n.cfg.Cluster)
	got, err := n.cli.Get(c, key)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	var ceiling uint64
	var modRev int64
	if len(got.Kvs) > 0 {
		kv := got.Kvs[0]
		if ceiling, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
			return fmt.Errorf("%s holds %q, not a decimal token: repair it by hand (etcdctl put %s <the largest token ever issued>)", key, kv.Value, key)
		}
		modRev = kv.ModRevision
	}
	now := time.Now()
	if n.cfg.TestWallClockOffset != nil {
		now = now.Add(n.cfg.TestWallClockOffset())
	}
	lo, hi, err := locktable.NextBlock(ceiling, now, first)
	if err != nil {
		return err
	}
	resp, err := n.cli.Txn(c).
		If(leaderGuard(e), clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, strconv.FormatUint(hi-1, 10))).
		Commit()
	if err != nil {
		return fmt.Errorf("reserve token block [%d, %d): %w", lo, hi, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("reserve token block [%d, %d): this node's leader key is gone or %s moved: not the leader any more", lo, hi, key)
	}
	if err := loop.HATokenBlock(c, term, lo, hi); err != nil {
		return fmt.Errorf("hand token block [%d, %d) to the event loop: %w", lo, hi, err)
	}
	return nil
}

// writeMaxLease raises max-lease to ms in etcd and tells the loop.
func (n *Node) writeMaxLease(ctx context.Context, loop Loop, term uint64, e *concurrency.Election, ms uint32) error {
	c, cancel := context.WithTimeout(ctx, n.opTimeout())
	defer cancel()
	key := maxLeaseKey(n.cfg.Cluster)
	resp, err := n.cli.Txn(c).If(leaderGuard(e)).Then(clientv3.OpPut(key, strconv.FormatUint(uint64(ms), 10))).Commit()
	if err != nil {
		return fmt.Errorf("write %s = %d: %w", key, ms, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("write %s = %d: this node's leader key is gone: not the leader any more", key, ms)
	}
	if err := loop.HAMaxLease(c, term, ms); err != nil {
		return fmt.Errorf("tell the event loop max-lease is %d ms: %w", ms, err)
	}
	return nil
}

// newLeaderWait is what a new leader's wait is made of, as etcd stores it.
type newLeaderWait struct {
	maxLease  uint32 // max-lease, ms (0 when never written)
	minTTL    uint32 // min-ttl, ms (0 when never written)
	minTTLRev int64  // min-ttl's ModRevision (0 when never written)
}

// credit is what the new leader's wait is shortened by, in ms: 0.2 × the
// smallest TTL any leader led with, this one's (own) included; 0 when
// min-ttl was never written (a cluster led only by servers that gave their
// key up as soon as their term ended).
func (w newLeaderWait) credit(own time.Duration) uint32 {
	if w.minTTL == 0 {
		return 0
	}
	return min(w.minTTL, uint32(own.Milliseconds())) / creditShare
}

// readWait reads max-lease and min-ttl, in one round trip.
func (n *Node) readWait(ctx context.Context) (newLeaderWait, error) {
	c, cancel := context.WithTimeout(ctx, n.opTimeout())
	defer cancel()
	maxKey, minKey := maxLeaseKey(n.cfg.Cluster), minTTLKey(n.cfg.Cluster)
	got, err := n.cli.Txn(c).Then(clientv3.OpGet(maxKey), clientv3.OpGet(minKey)).Commit()
	if err != nil {
		return newLeaderWait{}, fmt.Errorf("read %s and %s: %w", maxKey, minKey, err)
	}
	var w newLeaderWait
	if kvs := got.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		ms, err := strconv.ParseUint(string(kvs[0].Value), 10, 32)
		if err != nil {
			return w, fmt.Errorf("%s holds %q, not a lease in ms: repair it by hand (etcdctl put %s <the longest lease any client uses, in ms>)", maxKey, kvs[0].Value, maxKey)
		}
		w.maxLease = uint32(ms)
	}
	if kvs := got.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		ms, err := strconv.ParseUint(string(kvs[0].Value), 10, 32)
		if err != nil || ms == 0 {
			return w, fmt.Errorf("%s holds %q, not a TTL in ms: repair it by hand (etcdctl put %s <the smallest -ha-ttl of the cluster's nodes, in ms>)", minKey, kvs[0].Value, minKey)
		}
		w.minTTL, w.minTTLRev = uint32(ms), kvs[0].ModRevision
	}
	return w, nil
}

// recordMinTTL lowers min-ttl to this node's TTL, when it is smaller or
// min-ttl absent, before the loop is told it leads (so before it serves):
// a later leader's credit must not exceed 0.2 × this leader's TTL, which
// is all this leader's key is held after its loop's last answer. The write
// is guarded by the leader key, and by min-ttl's revision as read (w).
func (n *Node) recordMinTTL(ctx context.Context, e *concurrency.Election, w newLeaderWait) error {
	own := uint32(n.cfg.TTL.Milliseconds())
	if w.minTTL != 0 && w.minTTL <= own {
		return nil
	}
	c, cancel := context.WithTimeout(ctx, n.opTimeout())
	defer cancel()
	key := minTTLKey(n.cfg.Cluster)
	resp, err := n.cli.Txn(c).
		If(leaderGuard(e), clientv3.Compare(clientv3.ModRevision(key), "=", w.minTTLRev)).
		Then(clientv3.OpPut(key, strconv.FormatUint(uint64(own), 10))).
		Commit()
	if err != nil {
		return fmt.Errorf("write %s = %d: %w", key, own, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("write %s = %d: this node's leader key is gone or %s moved: not the leader any more", key, own, key)
	}
	return nil
}

// resign gives up e's leadership (its key), bounded; the lease's revocation
// follows.
func (n *Node) resign(e *concurrency.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), n.opTimeout())
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		n.log.Debug().Err(err).Msg("ha: etcd: resign failed; the lease's expiry ends the leadership")
	}
}

// revoke ends a lease, bounded.
func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), n.opTimeout())
	defer cancel()
	_, _ = n.cli.Revoke(ctx, id)
}

// keepalive is what keepAlive learnt: when the newest answered keepalive
// was sent, the term to report it for, and that the lease is lost.
type keepalive struct {
	mu     sync.Mutex
	newest time.Time
	term   uint64 // 0 before the election
	lost   chan error
}

func (k *keepalive) answered(sent time.Time) (term uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.newest = sent
	return k.term
}

func (k *keepalive) elected(term uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.term = term
}

func (k *keepalive) newestSent() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newest
}

// keepAlive sends a keepalive every TTL/4, each bounded, and reports every
// answered one with when it was sent: the leader's deadline counts from
// there. A lease etcd no longer knows is lost; a keepalive that fails
// otherwise is retried at the next beat (the deadline does the rest).
func (n *Node) keepAlive(ctx context.Context, id clientv3.LeaseID, k *keepalive, loop Loop) {
	every := n.cfg.TTL / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		c, cancel := context.WithTimeout(ctx, every)
		resp, err := n.cli.KeepAliveOnce(c, id)
		if err == nil {
			if granted := time.Duration(resp.TTL) * time.Second; granted < n.cfg.TTL {
				// etcd renewed for less than asked: the deadline counts
				// from as much earlier.
				sent = sent.Add(granted - n.cfg.TTL)
			}
			if term := k.answered(sent); term != 0 {
				err = loop.HAKeepalive(c, term, sent)
				if err != nil {
					n.log.Debug().Err(err).Msg("ha: etcd: the event loop did not take a keepalive in time")
				}
			}
			cancel()
			continue
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			n.log.Warn().Err(err).Msg("ha: etcd: keepalive failed; retrying at the next beat")
			continue
		}
		select {
		case k.lost <- fmt.Errorf("etcd lease %x expired: %w", id, err):
		default:
		}
		return
	}
}

// observe keeps Leader up to date while ctx lasts.
func (n *Node) observe(ctx context.Context, e *concurrency.Election) {
	for resp := range e.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		name := string(resp.Kvs[0].Value)
		if old := n.leader.Swap(&name); *old != name {
			n.log.Info().Str("leader", name).Msg(LeaderMessage)
		}
	}
}

// LeaderMessage is logged whenever the observed leader changes.
const LeaderMessage = "ha: the cluster's leader is"

// TLSConfig is the client TLS to etcd from PEM files: ca verifies etcd's
// certificate (empty: the system's roots), cert and key are this node's
// (both or neither).
func TLSConfig(ca, cert, key string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("etcd CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA %s: no PEM certificate in it", ca)
		}
		cfg.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("etcd client certificate: give both the certificate and its key, or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
