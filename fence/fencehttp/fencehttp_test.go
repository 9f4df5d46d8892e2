package fencehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/fence/fencehttp"
)

// serve runs one request with the given headers through the middleware and
// returns the status, the body and whether the handler behind it ran.
func serve(t *testing.T, g fencehttp.Guard, headers map[string]string) (int, string, bool) {
	t.Helper()
	ran := false
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		a, ok := fencehttp.FromContext(r.Context())
		if !ok || a.Lock != r.Header.Get(fencehttp.LockHeader) {
			t.Errorf("FromContext = %+v, %v", a, ok)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("work"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), ran
}

func TestMiddleware(t *testing.T) {
	var m fence.Memory
	g := fencehttp.Guard{Fence: &m}
	hdr := func(lock, token string) map[string]string {
		return map[string]string{fencehttp.LockHeader: lock, fencehttp.TokenHeader: token}
	}
	steps := []struct {
		headers map[string]string
		status  int
		body    string
	}{
		{hdr("reports", "9223372036854775808"), http.StatusNoContent, ""},
		{hdr("reports", "9223372036854775808"), http.StatusNoContent, ""}, // the same holder again
		{hdr("reports", "9223372036854775807"), http.StatusConflict, `stale token 9223372036854775807 for "reports": token 9223372036854775808 was admitted`},
		{hdr("reports", "18446744073709551615"), http.StatusNoContent, ""},
		{hdr("reports", "0"), http.StatusConflict, "token 0"},
		{hdr("reports", "-1"), http.StatusBadRequest, `Monolock-Token "-1" is not a fencing token: send the lock's token as a decimal unsigned 64-bit integer`},
		{hdr("reports", "18446744073709551616"), http.StatusBadRequest, "is not a fencing token"},
		{hdr("reports", ""), http.StatusBadRequest, `no Monolock-Token header: send the fencing token of lock "reports"`},
		{hdr("", "5"), http.StatusBadRequest, "no Monolock-Lock header"},
		{map[string]string{}, http.StatusBadRequest, "no Monolock-Lock header"},
	}
	for i, s := range steps {
		status, body, ran := serve(t, g, s.headers)
		if status != s.status || !strings.Contains(body, s.body) {
			t.Errorf("step %d %v: %d %q, want %d containing %q", i, s.headers, status, body, s.status, s.body)
		}
		if ran != (s.status == http.StatusNoContent) {
			t.Errorf("step %d: the handler ran = %v with status %d", i, ran, status)
		}
	}
	if got := m.Highest("reports"); got != 18446744073709551615 {
		t.Fatalf("highest %d", got)
	}
}

func TestGuardResource(t *testing.T) {
	g := fencehttp.Guard{Fence: &fence.Memory{}, Resource: "reports"}
	status, body, ran := serve(t, g, map[string]string{fencehttp.LockHeader: "other", fencehttp.TokenHeader: "5"})
	if status != http.StatusBadRequest || ran || !strings.Contains(body, `send the token of lock "reports"`) {
		t.Fatalf("%d %q ran=%v", status, body, ran)
	}
}

// stuckFence never answers: Admit returns when its context ends, and
// records whether that context had a deadline.
type stuckFence struct{ hadDeadline chan bool }

func (s stuckFence) Admit(ctx context.Context, _ string, _ uint64) error {
	_, ok := ctx.Deadline()
	s.hadDeadline <- ok
	<-ctx.Done()
	return ctx.Err()
}

func TestStuckStoreIsBounded(t *testing.T) {
	stuck := stuckFence{hadDeadline: make(chan bool, 1)}
	g := fencehttp.Guard{Fence: stuck, Timeout: time.Millisecond}
	status, body, ran := serve(t, g, map[string]string{fencehttp.LockHeader: "r", fencehttp.TokenHeader: "5"})
	if status != http.StatusServiceUnavailable || ran || !strings.Contains(body, "try again") {
		t.Fatalf("%d %q ran=%v", status, body, ran)
	}
	if !<-stuck.hadDeadline {
		t.Fatal("the admit ran without a deadline")
	}
}

func TestCheckAndStatus(t *testing.T) {
	var m fence.Memory
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(fencehttp.LockHeader, "r")
	req.Header.Set(fencehttp.TokenHeader, "7")
	a, err := fencehttp.Check(req, &m)
	if err != nil || a != (fencehttp.Admitted{Lock: "r", Token: 7}) {
		t.Fatalf("Check = %+v, %v", a, err)
	}
	req.Header.Set(fencehttp.TokenHeader, "6")
	_, err = fencehttp.Check(req, &m)
	if !errors.Is(err, fence.ErrStale) || fencehttp.Status(err) != http.StatusConflict {
		t.Fatalf("Check(6 after 7) = %v (status %d)", err, fencehttp.Status(err))
	}
	if s := fencehttp.Status(errors.New("db down")); s != http.StatusServiceUnavailable {
		t.Fatalf("Status(store error) = %d", s)
	}
}
