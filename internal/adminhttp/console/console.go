// Package console is the admin port's live console: a page of plain
// JavaScript and CSS, embedded in the binary, that shows the server's
// summary and its held locks through the admin API and calls its release
// and kick endpoints. It makes no request beyond the server that served it
// (no CDN, no web fonts), which the Content-Security-Policy of
// internal/adminhttp enforces.
//
//	GET /                      the page
//	GET /console/{file}        its script, style sheet and icon
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed static
var static embed.FS

// file is one embedded file, with what its answer needs.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Files serves the console's files.
type Files struct {
	files map[string]file // by name, "index.html" for the page
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// New reads the embedded files once.
func New() *Files {
	f := &Files{files: map[string]file{}}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic("console: the embedded files are missing: " + err.Error()) // a build error, not a run-time one
	}
	for _, e := range entries {
		body, err := fs.ReadFile(static, "static/"+e.Name())
		if err != nil {
			panic("console: reading embedded " + e.Name() + ": " + err.Error())
		}
		sum := sha256.Sum256(body)
		f.files[e.Name()] = file{
			body:        body,
			contentType: contentTypes[path.Ext(e.Name())],
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
	}
	return f
}

// Page answers GET /.
func (f *Files) Page(w http.ResponseWriter, r *http.Request) { f.serve(w, r, "index.html") }

// Asset answers GET /console/{file}; ok is false when there is no such
// file (the page itself is not an asset).
func (f *Files) Asset(w http.ResponseWriter, r *http.Request, name string) (ok bool) {
	if _, ok := f.files[name]; !ok || name == "index.html" {
		return false
	}
	f.serve(w, r, name)
	return true
}

// serve writes one file. The files change only with the binary: an ETag
// lets a console revalidate instead of downloading them again.
func (f *Files) serve(w http.ResponseWriter, r *http.Request, name string) {
	file := f.files[name]
	h := w.Header()
	h.Set("Content-Type", file.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", file.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(file.body))
}
