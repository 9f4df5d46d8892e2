package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/monolock/monolock/internal/auditcheck"
)

const auditCheckUsage = `Usage: monolockctl audit-check [FLAGS] FILE

Checks the history in an audit log (the server's -audit-log file; - reads
stdin). Works offline on any audit file, also one still being written.

Per lock, granted and released must alternate: a grant while the lock is held
means two holders, a release without a holder is a violation. A release and a
force_release carry the current holder's token. Tokens strictly increase over
all grants in the file, also across server restarts. Unknown events and
fields are ignored, so the check works on files from newer servers. Holders
without a release at the end of the file are listed as still held, which is
normal for a running server. A server that died without a clean shutdown
leaves its holders unreleased, so its successor's first grants of those locks
show up as two holders.

A line that is not an audit event (a partial line left by a crash or a full
disk, say) is reported with its number and skipped; the check goes on. The
check keeps only the locks held at a time, so its memory does not grow with the
number of lock names in the file; it lists the first %d violations and bad
lines and counts the rest.

Prints a report: line and event counts, the most locks held at once, the time
range, the largest token, the locks still held, the bad lines, and every
violation with its line number.

Flags:
%s
The connection flags are accepted like on every command and not used.

Exit status:
  0   no violations, no bad lines
  1   violations, listed in the report (whether or not there are bad lines)
  2   usage error
  65  no violations, but some lines are not audit events (not JSON, or a
      known event lacks a field); what they recorded was not checked
  66  FILE cannot be opened or read

Examples:
  monolockctl audit-check /var/log/monolock/audit.jsonl
  zcat audit.jsonl.1.gz | monolockctl audit-check -
`

func auditCheckMain(args []string, e *env) int {
	fs := flag.NewFlagSet("audit-check", flag.ContinueOnError)
	addConnFlags(fs, e.getenv)
	setUsage(fs, func(flags string) string { return fmt.Sprintf(auditCheckUsage, auditcheck.MaxListed, flags) })
	if status, ok := parseFlags(fs, args, e); !ok {
		return status
	}
	rest := fs.Args()
	switch {
	case len(rest) == 0:
		return usageError(e, "audit-check", "missing FILE (- for stdin)")
	case len(rest) > 1:
		return usageError(e, "audit-check", "unexpected argument %q: one FILE only", rest[1])
	}
	path := rest[0]
	var in io.Reader = e.stdin
	if path == "-" {
		path = "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(e.stderr, "monolockctl audit-check: %v\n", err)
			return exitNoInput
		}
		defer f.Close()
		in = f
	}
	rep, err := auditcheck.Check(in)
	fmt.Fprint(e.stdout, rep)
	if err != nil {
		fmt.Fprintf(e.stderr, "monolockctl audit-check: reading %s: %v\n", path, err)
		return exitNoInput
	}
	if rep.BadLineCount > 0 {
		fmt.Fprintf(e.stderr, "monolockctl audit-check: %s: %d lines are not audit events (first: %v); they were skipped\n",
			path, rep.BadLineCount, &rep.BadLines[0])
	}
	switch {
	case !rep.OK():
		fmt.Fprintf(e.stderr, "monolockctl audit-check: %s: %d violations\n", path, rep.ViolationCount)
		return exitFailed
	case rep.BadLineCount > 0:
		return exitDataErr
	}
	return 0
}
