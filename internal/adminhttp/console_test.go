package adminhttp_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/monolock/monolock/protocol"
)

// TestConsoleFiles: GET / is the console's page, its files are served under
// /console/, and nothing else is.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, c := range []struct{ path, contentType string }{
		{"/", "text/html; charset=utf-8"},
		{"/console/console.js", "text/javascript; charset=utf-8"},
		{"/console/console.css", "text/css; charset=utf-8"},
		{"/console/favicon.svg", "image/svg+xml"},
	} {
		r := e.do(t, "GET", c.path)
		if r.status != 200 || r.header.Get("Content-Type") != c.contentType || len(r.body) == 0 {
			t.Errorf("GET %s: %d %q, %d bytes; want 200 %q and the file", c.path, r.status, r.header.Get("Content-Type"), len(r.body), c.contentType)
		}
		if r.header.Get("ETag") == "" {
			t.Errorf("GET %s: no ETag: a console revalidates its files with it", c.path)
		}
	}
	for _, path := range []string{"/console/", "/console/index.html", "/console/nope.js", "/index.html", "/console/static"} {
		e.do(t, "GET", path).wantError(t, 404)
	}
}

// TestSecurityHeaders: every answer, page or API, keeps a browser to this
// server's own files and out of frames.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, path := range []string{"/", "/console/console.js", "/api/info", "/api/locks", "/api/nope"} {
		h := e.do(t, "GET", path).header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline code or another origin", path, csp)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if h.Get(k) != v {
				t.Errorf("GET %s: %s %q, want %q", path, k, h.Get(k), v)
			}
		}
	}
}

// TestConsoleMakesNoExternalRequest: the page loads only its own files, has
// no inline script or style (which the policy would block), and its script
// names no other origin.
func TestConsoleMakesNoExternalRequest(t *testing.T) {
	t.Parallel()
	e := start(t)
	page := string(e.do(t, "GET", "/").body)
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page references %d files, want its script, style sheet and icon: %s", len(refs), page)
	}
	for _, m := range refs {
		if !strings.HasPrefix(m[1], "/console/") {
			t.Errorf("the page loads %q: every file must be this server's, under /console/", m[1])
		}
	}
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]|<style|style="|\son[a-z]+="`).MatchString(page) {
		t.Error("the page has inline script, style or event handlers, which its Content-Security-Policy forbids")
	}
	for _, f := range []string{"/console/console.js", "/console/console.css"} {
		if body := string(e.do(t, "GET", f).body); regexp.MustCompile(`https?:|//[a-z]|@import|url\(`).MatchString(body) {
			t.Errorf("%s names another origin or an import: %s", f, regexp.MustCompile(`https?:[^"' ]*|//[a-z][^"' ]*|@import[^;]*|url\([^)]*\)`).FindString(body))
		}
	}
}

// TestCrossSiteChangesRefused: a release or a kick a browser sends from
// another site's page is a 403 and changes nothing; from the console's own
// origin, or from curl (no such headers), it works.
func TestCrossSiteChangesRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	h, _ := e.holder(t, "deploy")
	w := e.waiter(t, "deploy")
	release := e.api.URL + "/api/locks/deploy/release"
	kick := e.api.URL + "/api/locks/deploy/waiters/" + w.LocalAddr()
	for _, headers := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "http://evil.example"},
	} {
		for _, c := range []struct{ method, url string }{{"POST", release}, {"DELETE", kick}} {
			status, body := send(t, c.method, c.url, headers)
			if status != 403 || !strings.Contains(body, "another site") {
				t.Errorf("%s with %v: %d %s, want 403 saying why", c.method, headers, status, body)
			}
		}
	}
	// Both are still there: the holder answers its heartbeat with its lock,
	// the waiter with WAITING.
	h.SendHeartbeat()
	h.Expect(protocol.TypeAcquired)
	w.SendHeartbeat()
	w.Expect(protocol.TypeWaiting)

	if status, body := send(t, "DELETE", kick, map[string]string{"Sec-Fetch-Site": "same-origin"}); status != 200 {
		t.Errorf("a kick from the console's origin: %d %s, want 200", status, body)
	}
	w.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	if status, body := send(t, "POST", release, nil); status != 200 {
		t.Errorf("a release from curl: %d %s, want 200", status, body)
	}
	h.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
}

func send(t *testing.T, method, url string, headers map[string]string) (int, string) {
	t.Helper()
	r := doWith(t, method, url, headers)
	return r.status, string(r.body)
}
