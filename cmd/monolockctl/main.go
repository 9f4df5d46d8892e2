// Command monolockctl is monolock's command-line client. 'monolockctl run'
// runs a command while holding a lock, like flock(1) for a fleet; 'locks',
// 'lock', 'release', 'kick' and 'info' use the server's admin API;
// 'audit-check' checks the history in an audit log file.
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// badFlag reports an unknown flag or a bad flag value of command cmd in one
// line that names the flag, instead of the command's whole help.
func badFlag(cmd string, err error, e *env) int {
	fmt.Fprintf(e.stderr, "monolockctl %s: %v; run 'monolockctl %s -h' for usage\n", cmd, err, cmd)
	return exitUsage
}

// unknownCommand reports a first argument that is not a command (a flag
// before the command, for instance) in one line.
func unknownCommand(arg string, e *env) int {
	fmt.Fprintf(e.stderr, "monolockctl: unknown command %q; run 'monolockctl -h' for usage\n", arg)
	return exitUsage
}
