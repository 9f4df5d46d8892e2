package adminhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol/admin"
)

// safetyNet bounds every blocking wait of these tests: a net against a hung
// test, never a timing assertion.
const safetyNet = 5 * time.Second

// listingBackend holds every lock listed; with gate set, a full listing
// (no limit=) reports that it entered and waits for gate.
type listingBackend struct {
	Backend
	locks         []admin.LockInfo
	entered, gate chan struct{}
}

func (b *listingBackend) Locks(_ context.Context, q admin.LockQuery) (admin.LockList, error) {
	if b.gate != nil && q.Limit == 0 {
		b.entered <- struct{}{}
		<-b.gate
	}
	return admin.LockList{Locks: b.locks, Total: len(b.locks)}, nil
}

// stuckWriter is a client that does not read: its first Write reports that
// it was entered and waits for release.
type stuckWriter struct {
	header           http.Header
	entered, release chan struct{}
}

func (s *stuckWriter) Header() http.Header { return s.header }
func (s *stuckWriter) WriteHeader(int)     {}
func (s *stuckWriter) Write(b []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.release
	return len(b), nil
}

// serve runs one request in the background; the channel gets its answer.
func serve(h http.Handler, target string) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		out <- rec
	}()
	return out
}

func await(t *testing.T, answer <-chan *httptest.ResponseRecorder, what string) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case rec := <-answer:
		return rec
	case <-time.After(safetyNet):
		t.Fatalf("%s was not answered: it waits for a listing's turn", what)
		return nil
	}
}

// TestListingTurnEndsOnceEncoded: clients that do not read their full
// listings, as many as listings may run at once, leave the turn free for
// the next listing once their answers are encoded.
func TestListingTurnEndsOnceEncoded(t *testing.T) {
	t.Parallel()
	b := &listingBackend{locks: []admin.LockInfo{{Name: "deploy/prod", Waiters: []admin.WaiterInfo{}}}}
	h := New(b, Info{})
	release := make(chan struct{})
	defer close(release)
	for range maxListings() {
		w := &stuckWriter{header: http.Header{}, entered: make(chan struct{}), release: release}
		go h.ServeHTTP(w, httptest.NewRequest("GET", "/api/locks", nil))
		select {
		case <-w.entered: // the answer is encoded and being written
		case <-time.After(safetyNet):
			t.Fatal("a listing never began to write its answer")
		}
	}
	rec := await(t, serve(h, "/api/locks"), "a full listing behind clients that do not read")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "deploy/prod") {
		t.Fatalf("a full listing behind clients that do not read: %d %s", rec.Code, rec.Body)
	}
}

// TestPagesDoNotQueueBehindFullListings: with every full listing's turn
// taken, a page of the list (the console's poll) is served.
func TestPagesDoNotQueueBehindFullListings(t *testing.T) {
	t.Parallel()
	b := &listingBackend{locks: []admin.LockInfo{{Name: "deploy/prod", Waiters: []admin.WaiterInfo{}}},
		entered: make(chan struct{}), gate: make(chan struct{})}
	h := New(b, Info{})
	var full []<-chan *httptest.ResponseRecorder
	for range maxListings() {
		full = append(full, serve(h, "/api/locks"))
		select {
		case <-b.entered:
		case <-time.After(safetyNet):
			t.Fatal("a full listing never reached the backend")
		}
	}
	rec := await(t, serve(h, "/api/locks?limit=50"), "a page while full listings run")
	if rec.Code != http.StatusOK {
		t.Fatalf("a page while full listings run: %d %s", rec.Code, rec.Body)
	}
	close(b.gate)
	for _, f := range full {
		if rec := await(t, f, "a full listing"); rec.Code != http.StatusOK {
			t.Fatalf("a full listing: %d %s", rec.Code, rec.Body)
		}
	}
}

// TestFullListingsWaitAFewAtATime: with every turn taken and the waiting
// room full, a full listing is refused at once with 503 saying what to do;
// a page is not.
func TestFullListingsWaitAFewAtATime(t *testing.T) {
	t.Parallel()
	b := &listingBackend{locks: []admin.LockInfo{}}
	h := New(b, Info{}).(*handler)
	for range cap(h.fullListings.running) {
		h.fullListings.running <- struct{}{}
	}
	for range cap(h.fullListings.waiting) {
		h.fullListings.waiting <- struct{}{}
	}
	rec := await(t, serve(h, "/api/locks"), "a full listing with the waiting room full")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "limit=1000") {
		t.Fatalf("a full listing with the waiting room full: %d %s, want 503 suggesting a page", rec.Code, rec.Body)
	}
	if rec := await(t, serve(h, "/api/locks?limit=50"), "a page"); rec.Code != http.StatusOK {
		t.Fatalf("a page with the full listings' waiting room full: %d %s", rec.Code, rec.Body)
	}
}

// TestListingTurns: a listing waits for a turn and gets the one given back;
// one more than the waiting room holds is refused at once; one whose
// context ends stops waiting.
func TestListingTurns(t *testing.T) {
	t.Parallel()
	turns := newListingTurns(1, 1)
	done, err := turns.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	turns.waiting <- struct{}{} // another listing waits
	if _, err := turns.take(context.Background()); !errors.Is(err, errListingsBusy) {
		t.Fatalf("with the waiting room full: %v, want errListingsBusy", err)
	}
	<-turns.waiting
	go func() {
		next, err := turns.take(context.Background())
		if err == nil {
			next()
		}
		got <- err
	}()
	done()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting listing: %v", err)
		}
	case <-time.After(safetyNet):
		t.Fatal("the waiting listing never got the turn given back")
	}
	hold, _ := turns.take(context.Background())
	defer hold()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := turns.take(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a listing whose request ended: %v, want context.Canceled", err)
	}
	if len(turns.waiting) != 0 {
		t.Fatal("a listing that stopped waiting still holds a place in the waiting room")
	}
}
