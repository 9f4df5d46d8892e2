package main

// Exit statuses of monolockctl itself. Those of 'run' follow sysexits.h where
// one fits, so scripts can tell "try later" from "broken"; each command's
// help lists its own.
const (
	exitFailed      = 1   // admin API error; audit-check found violations
	exitUsage       = 2   // bad flags or arguments, invalid name or lease, TLS files, server error ≥ 0x10
	exitNoSuch      = 3   // admin: no such lock (idle) or waiter
	exitDataErr     = 65  // EX_DATAERR: audit-check skipped lines that are not audit events
	exitNoInput     = 66  // EX_NOINPUT: audit-check cannot open or read its file
	exitUnavailable = 69  // EX_UNAVAILABLE: no connection, or it ended before the grant; admin API unreachable or 503
	exitBusy        = 75  // EX_TEMPFAIL: -no-wait found the lock held, or -wait elapsed
	exitLost        = 76  // the lock was lost while the command ran
	exitCannotExec  = 126 // the command exists but could not be started (as in sh)
	exitNotFound    = 127 // the command was not found (as in sh)
	exitSignalBase  = 128 // + signal number: killed by, or interrupted by, that signal
)
