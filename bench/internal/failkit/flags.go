package failkit

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Common are the settings every failover harness has.
type Common struct {
	Server  string // the monolock binary
	Rounds  int    // of each fault
	Clients int
	Locks   int
	Lease   time.Duration // the clients'
	Results string        // also write the table here
	Keep    bool          // keep the logs
}

// Register adds the common flags to fs, the clients' lease defaulting to
// lease.
func (c *Common) Register(fs *flag.FlagSet, lease time.Duration) {
	fs.StringVar(&c.Server, "server", filepath.Join("..", "bin", "monolock"), "server binary (make build's output, seen from bench/)")
	fs.IntVar(&c.Rounds, "rounds", 5, "rounds of each fault")
	fs.IntVar(&c.Clients, "clients", 30, "clients on the client host")
	fs.IntVar(&c.Locks, "locks", 6, "lock names they share")
	fs.DurationVar(&c.Lease, "lease", lease, "the clients' lease")
	fs.StringVar(&c.Results, "results", "", "also write the table as Markdown to this file")
	fs.BoolVar(&c.Keep, "keep", false, "keep the logs (always kept when there are violations)")
}

// Check rejects common settings out of range and makes Server absolute.
func (c *Common) Check() error {
	if c.Rounds < 1 || c.Clients < 1 || c.Locks < 1 || c.Lease < 100*time.Millisecond {
		return errors.New("want -rounds, -clients, -locks >= 1 and -lease >= 100ms")
	}
	var err error
	c.Server, err = filepath.Abs(c.Server)
	return err
}

// Tool is a program a harness runs and how to install it.
type Tool struct{ Name, Install string }

// Preflight says what is missing before anything is made: root, the tools
// (ip and curl always), the server binary.
func (c *Common) Preflight(why string, tools ...Tool) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (%s): run it as root, as .ci/run does", why)
	}
	for _, tool := range append([]Tool{{"ip", "apt-get install -y iproute2"}, {"curl", "apt-get install -y curl"}}, tools...) {
		if _, err := exec.LookPath(tool.Name); err != nil {
			return fmt.Errorf("%s is not on PATH: %s", tool.Name, tool.Install)
		}
	}
	if _, err := os.Stat(c.Server); err != nil {
		return fmt.Errorf("server binary: %w; run make build first", err)
	}
	return nil
}

// ClientsMain runs the client process (RunClients) and exits when this
// executable was started as one (first argument ClientsCommand); otherwise
// it returns and the harness runs.
func ClientsMain(name, defaultAddr string) {
	if len(os.Args) < 2 || os.Args[1] != ClientsCommand {
		return
	}
	if err := RunClients(os.Args[2:], defaultAddr); err != nil {
		fmt.Fprintln(os.Stderr, name+" clients:", err)
		os.Exit(2)
	}
	os.Exit(0)
}
