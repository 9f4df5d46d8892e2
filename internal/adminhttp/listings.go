package adminhttp

import (
	"context"
	"errors"
	"runtime"
)

// Lock listings are bounded twice. Matching, sorting and encoding thousands
// of locks each keep a core busy, and the event loop needs one: at most
// maxListings run at once, and a listing's turn ends once its answer is
// encoded, before it is written. Writing is the client's pace: a client
// that does not read would otherwise keep the turn until the write timeout
// (30 s), and every listing behind it would wait or fail. What a slow
// reader holds then is its own encoded answer and its connection, which
// the HTTP server's connection cap and write timeout bound.
//
// Full listings (no limit=) and pages (limit=, the console's polls) take
// turns apart, so that pages, bounded by admin.MaxPageSize, never queue
// behind listings of every lock. Full listings may also only wait
// fullListingsWaiting at a time: beyond that they are refused at once, so that clients asking for
// every lock faster than the server encodes them cannot make their requests
// pile up and take every connection of the port.

// maxListings bounds the listings of one kind served at once: half the
// cores, and at least one.
func maxListings() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// fullListingsWaiting bounds the full listings waiting for a turn: a
// quarter of the 64 connections an admin port serves at most, so that the
// port keeps the others for the console, probes and operators.
const fullListingsWaiting = 16

// errListingsBusy is a listing refused because too many wait for a turn.
var errListingsBusy = errors.New("too many lock listings are waiting")

// listingTurns bounds the listings of one kind.
type listingTurns struct {
	running chan struct{} // a token per listing taking its turn
	waiting chan struct{} // a token per listing waiting for one; nil: no bound but the request's context
}

func newListingTurns(running, waiting int) *listingTurns {
	t := &listingTurns{running: make(chan struct{}, running)}
	if waiting > 0 {
		t.waiting = make(chan struct{}, waiting)
	}
	return t
}

// take waits for a turn until ctx ends; it returns errListingsBusy at once
// when the waiting room is full. The caller must call done when its answer
// is encoded.
func (t *listingTurns) take(ctx context.Context) (done func(), err error) {
	done = func() { <-t.running }
	select {
	case t.running <- struct{}{}:
		return done, nil
	default:
	}
	if t.waiting != nil {
		select {
		case t.waiting <- struct{}{}:
			defer func() { <-t.waiting }()
		default:
			return nil, errListingsBusy
		}
	}
	select {
	case t.running <- struct{}{}:
		return done, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
