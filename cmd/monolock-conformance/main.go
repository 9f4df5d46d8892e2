// Command monolock-conformance judges a monolock client: it plays the
// server's side of scripted scenarios over real sockets on 127.0.0.1, runs the
// client's driver for each, and judges the client from the wire and from the
// events the driver prints. docs/conformance.md is the driver contract and
// the list of scenarios.
//
//	monolock-conformance -driver go=bin/godriver \
//	    -driver 'python=python3 clients/python/conformance_driver.py' \
//	    -judge python -server bin/monolock
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/monolock/monolock/internal/conformance"
)

type driverFlags []conformance.Driver

func (d *driverFlags) String() string { return fmt.Sprint(*d) }
func (d *driverFlags) Set(s string) error {
	dr, err := conformance.ParseDriver(s)
	if err != nil {
		return err
	}
	*d = append(*d, dr)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("monolock-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var drivers driverFlags
	fs.Var(&drivers, "driver", "NAME=COMMAND: a client's driver, the command split at spaces; repeat for every client, the reference (Go) first")
	supports := map[string][]string{}
	fs.Func("supports", "NAME=FEATURE[,FEATURE]: optional parts of the driver contract driver NAME implements (addresses); a scenario that needs one the judged driver lacks is skipped", func(s string) error {
		name, features, ok := strings.Cut(s, "=")
		if !ok || name == "" || features == "" {
			return fmt.Errorf("-supports %q: want NAME=FEATURE[,FEATURE], for example -supports go=addresses", s)
		}
		supports[name] = append(supports[name], strings.Split(features, ",")...)
		return nil
	})
	judge := fs.String("judge", "", "the NAME of the driver to judge (default: the first)")
	server := fs.String("server", "", "a monolock binary for the end-to-end scenarios (none: they are skipped)")
	match := fs.String("run", "", "run only the scenarios whose name matches this regular expression")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(drivers) == 0 {
		fmt.Fprintln(stderr, "monolock-conformance: no driver: give -driver NAME=COMMAND, for example -driver go=bin/godriver")
		return 2
	}
	for i := range drivers {
		drivers[i].Supports = append(drivers[i].Supports, supports[drivers[i].Name]...)
	}
	cfg := conformance.Config{Drivers: drivers, Judge: drivers[0], Server: *server}
	if *judge != "" {
		found := false
		for _, d := range drivers {
			if d.Name == *judge {
				cfg.Judge, found = d, true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "monolock-conformance: -judge %s names no -driver; the drivers are %v\n", *judge, drivers)
			return 2
		}
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		fmt.Fprintf(stderr, "monolock-conformance: -run %q: %v\n", *match, err)
		return 2
	}
	failed := 0
	passed := 0
	for _, sc := range conformance.Scenarios() {
		if !re.MatchString(sc.Name) {
			continue
		}
		res := conformance.Run(sc, cfg)
		fmt.Fprintln(stdout, res)
		if res.Err != nil {
			failed++
			if res.Diagnostics != "" {
				fmt.Fprint(stdout, res.Diagnostics)
			}
		} else if res.Skipped == "" {
			passed++
		}
	}
	fmt.Fprintf(stdout, "%s: %d passed, %d failed\n", cfg.Judge.Name, passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
