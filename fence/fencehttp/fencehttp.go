// Package fencehttp checks monolock fencing tokens at the door of an HTTP
// service that receives work from lock holders: the holder sends its lock's
// name and token in two headers, and the service admits the token against a
// fence.Fence before it acts.
//
//	Monolock-Lock: reports
//	Monolock-Token: 18446744073709551615
//
// A stale token is answered 409 Conflict, a missing or malformed header 400
// Bad Request, a fence store that fails or does not answer in time 503
// Service Unavailable; each with a plain-text body that says why and what to
// do.
//
// The lock name is the fence's resource. A service that serves one resource
// should also check that the name is the one it expects (Guard.Resource).
package fencehttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/monolock/monolock/fence"
)

// The request headers a lock holder sends.
const (
	LockHeader  = "Monolock-Lock"
	TokenHeader = "Monolock-Token"
)

// DefaultTimeout bounds one admit against the fence store when
// Guard.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// ErrBadRequest is wrapped by Check's error when the headers are missing or
// malformed (answered 400).
var ErrBadRequest = errors.New("fencehttp: bad fencing headers")

// Guard admits the token of each request against Fence.
type Guard struct {
	Fence fence.Fence
	// Resource, when set, is the only lock name accepted.
	Resource string
	// Timeout bounds one admit; DefaultTimeout when zero.
	Timeout time.Duration
}

// Admitted is what a request proved: the lock it holds and its token.
type Admitted struct {
	Lock  string
	Token uint64
}

type admittedKey struct{}

// FromContext returns what the request whose context this is proved, when
// it passed the middleware.
func FromContext(ctx context.Context) (Admitted, bool) {
	a, ok := ctx.Value(admittedKey{}).(Admitted)
	return a, ok
}

// Check reads the lock name and token from r's headers and admits them.
// Its error wraps ErrBadRequest (400), fence.ErrStale (409), or is the
// store's failure (503); Status maps it.
func (g Guard) Check(r *http.Request) (Admitted, error) {
	lock := r.Header.Get(LockHeader)
	raw := r.Header.Get(TokenHeader)
	switch {
	case lock == "":
		return Admitted{}, fmt.Errorf("%w: the request has no %s header: send the lock's name in %s and its fencing token in %s", ErrBadRequest, LockHeader, LockHeader, TokenHeader)
	case g.Resource != "" && lock != g.Resource:
		return Admitted{}, fmt.Errorf("%w: %s %q is not the lock this service is guarded by: send the token of lock %q", ErrBadRequest, LockHeader, lock, g.Resource)
	case raw == "":
		return Admitted{}, fmt.Errorf("%w: the request has no %s header: send the fencing token of lock %q in %s, in decimal", ErrBadRequest, TokenHeader, lock, TokenHeader)
	}
	token, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return Admitted{}, fmt.Errorf("%w: %s %q is not a fencing token: send the lock's token as a decimal unsigned 64-bit integer", ErrBadRequest, TokenHeader, raw)
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := g.Fence.Admit(ctx, lock, token); err != nil {
		return Admitted{}, err
	}
	return Admitted{Lock: lock, Token: token}, nil
}

// Status is the HTTP status that answers an error of Check.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, fence.ErrStale):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

// WriteError answers r with err's status and a body that says why. A store
// failure's detail stays in the service (it may name its database); the
// body says to try again.
func WriteError(w http.ResponseWriter, err error) {
	status := Status(err)
	msg := err.Error()
	if status == http.StatusServiceUnavailable {
		msg = "fencehttp: the fence store could not check the token in time; try again"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg)
}

// Wrap returns a handler that passes a request on to next only when its
// token is admitted (FromContext tells next what it proved), and answers it
// itself otherwise.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := g.Check(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admittedKey{}, a)))
	})
}

// Middleware is Guard{Fence: f}.Wrap(next).
func Middleware(f fence.Fence, next http.Handler) http.Handler {
	return Guard{Fence: f}.Wrap(next)
}

// Check is Guard{Fence: f}.Check(r), for a handler that checks by itself.
func Check(r *http.Request, f fence.Fence) (Admitted, error) {
	return Guard{Fence: f}.Check(r)
}
