// Command monolockctl is monolock's command-line client. 'monolockctl run'
// runs a command while holding a lock, like flock(1) for a fleet.
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}
