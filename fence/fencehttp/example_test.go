package fencehttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/fence/fencehttp"
)

// The service side: the middleware admits each request's token before the
// handler runs, and the handler learns from FromContext what the request
// proved. A request with a stale token gets 409 and never reaches the
// handler. (The fence here is in memory; a service with a database uses
// fence.Table, whose fence table every replica shares.)
func ExampleMiddleware() {
	var admitted fence.Memory
	publish := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := fencehttp.FromContext(r.Context())
		fmt.Printf("handler: publishing for %s under token %d\n", a.Lock, a.Token)
		w.WriteHeader(http.StatusNoContent)
	})
	h := fencehttp.Middleware(&admitted, publish)

	send := func(token string) {
		req := httptest.NewRequest(http.MethodPost, "/publish", strings.NewReader("report"))
		req.Header.Set(fencehttp.LockHeader, "reports")
		req.Header.Set(fencehttp.TokenHeader, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Body.String())))
	}
	send("8")
	send("9")
	send("8") // the holder of 8 was paused and has been handed on
	send("eight")
	// Output:
	// handler: publishing for reports under token 8
	// 204
	// handler: publishing for reports under token 9
	// 204
	// 409 fence: stale token 8 for "reports": token 9 was admitted, so the lock was handed on; stop the work and take the lock again
	// 400 fencehttp: bad fencing headers: Monolock-Token "eight" is not a fencing token: send the lock's token as a decimal unsigned 64-bit integer
}

// The holder's side: every request of the guarded work carries the lock's
// name and its fencing token (the token client.Client.Do passes to its
// function, or Lock.Token), in decimal. A 409 answer means the lock was
// handed on: stop the work rather than retry with the same token.
func Example_holder() {
	// The service, as in the Middleware example.
	svc := fencehttp.Guard{Fence: &fence.Memory{}, Resource: "reports"}.Wrap(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))

	// publish is what a lock holder calls for each write, with the name
	// and token of the lock it holds.
	publish := func(lock string, token uint64) error {
		req, err := http.NewRequest(http.MethodPost, "http://reports.internal/publish", strings.NewReader("report"))
		if err != nil {
			return err
		}
		req.Header.Set(fencehttp.LockHeader, lock)
		req.Header.Set(fencehttp.TokenHeader, strconv.FormatUint(token, 10))
		rec := httptest.NewRecorder() // a real holder sends req with an http.Client
		svc.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent:
			return nil
		case http.StatusConflict:
			return fmt.Errorf("lock %q was handed on: stop: %s", lock, strings.TrimSpace(rec.Body.String()))
		}
		return fmt.Errorf("publish: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}

	fmt.Println(publish("reports", 18446744073709551615)) // tokens use all 64 bits
	fmt.Println(publish("reports", 9223372036854775808))
	fmt.Println(publish("invoices", 1))
	// Output:
	// <nil>
	// lock "reports" was handed on: stop: fence: stale token 9223372036854775808 for "reports": token 18446744073709551615 was admitted, so the lock was handed on; stop the work and take the lock again
	// publish: 400 fencehttp: bad fencing headers: Monolock-Lock "invoices" is not the lock this service is guarded by: send the token of lock "reports"
}
