package failkit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/testsupport/fenced"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/protocol"
)

// Event is one line the client process writes for the harness: what a
// client saw, or what the fenced resource did with a write.
type Event struct {
	Kind  string `json:"e"`              // answered, granted, ended, write, paused, dialfail
	C     int    `json:"c"`              // client id
	Hold  int    `json:"h,omitempty"`    // the client's grant number, for granted/ended/write
	Lock  string `json:"lock,omitempty"` // lock name
	Token uint64 `json:"tok,omitempty"`
	OK    bool   `json:"ok,omitempty"` // write accepted
	At    int64  `json:"t"`            // wall clock, Unix nanoseconds (a write: when the resource decided it)
	Until int64  `json:"u,omitempty"`  // end of a long pause
	Why   string `json:"why,omitempty"`
}

// emitter writes events as JSON lines, one writer at a time.
type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
	w   *bufio.Writer
}

func (e *emitter) emit(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}

func (e *emitter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.w.Flush()
}

// ClientsCommand is the first argument that makes a harness's executable
// the client process (RunClients) instead of the harness.
const ClientsCommand = "clients"

// RunClients is the client process, run inside the client host's
// namespace: n clients take random locks of the servers at -addr until
// stdin closes, holding each a short while and writing to the fenced
// resource; events go to stdout. -addr is one address or several,
// comma-separated (see newClient).
func RunClients(args []string, defaultAddr string) error {
	fs := flag.NewFlagSet(ClientsCommand, flag.ContinueOnError)
	addrs := fs.String("addr", defaultAddr, "server address, or several comma-separated")
	n := fs.Int("n", 30, "clients")
	locks := fs.Int("locks", 6, "lock names")
	lease := fs.Duration("lease", 2*time.Second, "lease")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	out := &emitter{enc: json.NewEncoder(w), w: w}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			out.flush()
		}
	}()
	res := fenced.New(fenced.Options{}) // the fence rule of package fence, in this process
	cl := newClient(strings.Split(*addrs, ","))
	var wg sync.WaitGroup
	for id := range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{id: id, cl: cl, locks: *locks, lease: *lease, res: res, out: out}
			w.run(ctx)
		}()
	}
	wg.Wait()
	out.flush()
	return nil
}

// dialTimeout bounds each connect: a dial to an address that is moving, or
// whose packets are dropped, must not hang for the kernel's minutes.
const dialTimeout = time.Second

// newClient is the one place that decides how the clients reach the
// servers: the Go client's own list of addresses (it starts from the one
// that worked last and tries the others on a failed connect), each connect
// bounded by dialTimeout.
func newClient(addrs []string) *client.Client {
	return client.New(client.Config{Address: addrs[0], Addrs: addrs[1:], Dialer: &net.Dialer{Timeout: dialTimeout}})
}

type worker struct {
	id    int
	cl    *client.Client
	locks int
	lease time.Duration
	res   *fenced.Resource
	out   *emitter
	holds int
}

func now() int64 { return time.Now().UnixNano() }

// run queues for a random lock, holds it for a few hundred milliseconds with
// writes, releases, and again; after a failure it waits as the Go client's
// DoRetry does: a uniform delay in [0, min(1s, lease/4)] after ERROR 0x01,
// otherwise exponential backoff from 100ms with equal jitter.
func (w *worker) run(ctx context.Context) {
	step := 100 * time.Millisecond
	for ctx.Err() == nil {
		lock := fmt.Sprintf("job-%d", rand.IntN(w.locks))
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := w.cl.Enqueue(attempt, lock, w.lease)
		cancel()
		if err != nil {
			w.out.emit(Event{Kind: "dialfail", C: w.id, At: now(), Why: err.Error()})
			half := step / 2
			_ = poll.Sleep(ctx, half+time.Duration(rand.Int64N(int64(half)+1)))
			step = min(2*step, 5*time.Second)
			continue
		}
		step = 100 * time.Millisecond
		w.out.emit(Event{Kind: "answered", C: w.id, Lock: lock, At: now()})
		lost := w.hold(ctx, l)
		_ = l.Close()
		if errors.Is(lost, protocol.ErrShuttingDown) {
			_ = poll.Sleep(ctx, time.Duration(rand.Int64N(int64(min(time.Second, w.lease/4))+1)))
		}
	}
}

// hold waits for the grant, then works: a pause without looking, a write,
// until the hold time is over or the lock is lost; a write made after a loss
// is the stale write fencing is for. It returns the loss cause.
func (w *worker) hold(ctx context.Context, l *client.Lock) error {
	select {
	case <-l.Granted():
	case <-l.Lost():
		return l.Err()
	case <-ctx.Done():
		return nil
	}
	w.holds++
	h, tok := w.holds, l.Token()
	w.out.emit(Event{Kind: "granted", C: w.id, Hold: h, Lock: l.Name(), Token: tok, At: now()})
	// The moment the library declares the lock lost is when the holder
	// must stop: recorded as it happens, not when the worker looks. When
	// the lease ran out, that moment is ValidUntil (after it Valid is
	// false), however late this process gets to run the callback.
	ended := make(chan struct{})
	stop := context.AfterFunc(l.Context(), func() {
		end := time.Now()
		if until := l.ValidUntil(); !until.IsZero() && until.Before(end) {
			end = until
		}
		w.out.emit(Event{Kind: "ended", C: w.id, Hold: h, Lock: l.Name(), Token: tok, At: end.UnixNano(), Why: fmt.Sprint(l.Err())})
		close(ended)
	})
	until := time.Now().Add(time.Duration(200+rand.IntN(400)) * time.Millisecond)
	// One hold in eight starts with a long pause without looking (a GC
	// pause, a swapped-out process): if the lock is lost meanwhile, its
	// write comes after the standby's grants and must be rejected.
	long := rand.IntN(8) == 0
	for time.Now().Before(until) && ctx.Err() == nil {
		if long {
			d := time.Duration(2500+rand.IntN(2000)) * time.Millisecond
			w.out.emit(Event{Kind: "paused", C: w.id, Hold: h, At: now(), Until: time.Now().Add(d).UnixNano()})
			_ = poll.Sleep(ctx, d)
			long = false
		} else {
			_ = poll.Sleep(ctx, time.Duration(20+rand.IntN(60))*time.Millisecond)
		}
		wr := w.res.Write(ctx, l.Name(), strconv.Itoa(w.id), tok)
		w.out.emit(Event{Kind: "write", C: w.id, Hold: h, Lock: l.Name(), Token: tok, OK: wr.Accepted, At: wr.At.UnixNano()})
		if l.Context().Err() != nil {
			break
		}
	}
	if stop() { // still held: this is the release
		w.out.emit(Event{Kind: "ended", C: w.id, Hold: h, Lock: l.Name(), Token: tok, At: now(), Why: "released"})
		return nil
	}
	<-ended
	return l.Err()
}
