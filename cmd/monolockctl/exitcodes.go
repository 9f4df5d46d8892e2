package main

// Exit statuses of monolockctl itself. Those of 'run' follow sysexits.h where
// one fits, so scripts can tell "try later" from "broken"; the run command's
// help lists them.
const (
	exitUsage       = 2   // bad flags or arguments, invalid name or lease, TLS files, server error ≥ 0x10
	exitUnavailable = 69  // EX_UNAVAILABLE: no connection, or it ended before the grant
	exitBusy        = 75  // EX_TEMPFAIL: -no-wait found the lock held, or -wait elapsed
	exitLost        = 76  // the lock was lost while the command ran
	exitCannotExec  = 126 // the command exists but could not be started (as in sh)
	exitNotFound    = 127 // the command was not found (as in sh)
	exitSignalBase  = 128 // + signal number: killed by, or interrupted by, that signal
)
