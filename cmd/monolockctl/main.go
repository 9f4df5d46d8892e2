// Command monolockctl is monolock's command-line client. 'monolockctl run'
// runs a command while holding a lock, like flock(1) for a fleet; 'locks',
// 'lock', 'release', 'kick' and 'info' use the server's admin API;
// 'audit-check' checks the history in an audit log file.
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}
