package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
)

// How the admin commands answer a person: an exit status and one line for
// each failure, the API's JSON as it came with -json, and table cells.

// failed prints err as "monolockctl: <message>" and returns the exit status:
// exitUnavailable for no answer or the API's 503, exitUsage for TLS settings
// that do not fit the admin port, notFound for the API's 404
// (the command decides what a 404 means), exitFailed otherwise.
func failed(e *env, err error, notFound int) int {
	fmt.Fprintf(e.stderr, "monolockctl: %v\n", err)
	var unreachable *unreachableError
	var api *apiError
	var mismatch *tlsMismatchError
	switch {
	case errors.As(err, &unreachable):
		return exitUnavailable
	case errors.As(err, &mismatch):
		return exitUsage
	case !errors.As(err, &api) || api.notAPI:
		return exitFailed
	case api.status == http.StatusServiceUnavailable:
		return exitUnavailable
	case api.status == http.StatusNotFound:
		return notFound
	}
	return exitFailed
}

// printJSON writes an answer indented.
func printJSON(e *env, body []byte) int {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(body), "", "  "); err != nil {
		return failed(e, err, exitFailed)
	}
	out.WriteByte('\n')
	_, _ = e.stdout.Write(out.Bytes())
	return 0
}

// fetch makes an admin command's one request. With -json it prints the
// answer as it is; otherwise it decodes the answer into v for the command's
// table (tokens are uint64 fields, which encoding/json decodes exactly).
// done reports that the command is over, with status its exit status: the
// request failed, the answer was printed, or it did not decode. When the API
// answers 404 and missing is set, missing is printed in place of the API's
// message (which names HTTP paths, not commands) and the status is
// exitNoSuch; without missing a 404 is a failure like any other.
func fetch(e *env, a *adminFlags, c *adminClient, method, path string, query url.Values, missing string, v any) (status int, done bool) {
	body, err := c.call(method, path, query)
	var api *apiError
	if missing != "" && errors.As(err, &api) && api.status == http.StatusNotFound && !api.notAPI {
		fmt.Fprintf(e.stderr, "monolockctl: %s\n", missing)
		return exitNoSuch, true
	}
	if err != nil {
		return failed(e, err, exitFailed), true
	}
	if a.json {
		return printJSON(e, body), true
	}
	if err := json.Unmarshal(body, v); err != nil {
		return failed(e, fmt.Errorf("unexpected answer from the admin API: %v", err), exitFailed), true
	}
	return 0, false
}

// timeFormat is how tables print times: UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}

func fmtMS(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// cell makes a string safe for a table cell: empty is "-", and a string with
// tabs, newlines or other unprintable characters is quoted.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// holderCell is the holder's address, with its identity under mutual TLS.
func holderCell(addr, identity string) string {
	if identity == "" {
		return cell(addr)
	}
	return cell(addr) + " (" + cell(identity) + ")"
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return cell(s)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
