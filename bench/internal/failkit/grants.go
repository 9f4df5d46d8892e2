package failkit

import (
	"fmt"
	"os"
	"time"

	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/auditcheck"
)

// Grant is one grant in a server's audit log.
type Grant struct {
	Lock  string
	Token uint64
	At    time.Time
}

// ReadGrants returns the granted events of an audit log, in the log's
// order, read with internal/auditcheck's reader. Lines that are not audit
// events are passed over: a server that was SIGKILLed may leave a torn last
// line.
func ReadGrants(path string) ([]Grant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	events, _, err := auditcheck.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Grant
	for _, e := range events {
		if e.Event == audit.EventGranted {
			out = append(out, Grant{Lock: e.Lock, Token: e.Token, At: e.Time})
		}
	}
	return out, nil
}
