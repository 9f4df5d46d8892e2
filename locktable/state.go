package locktable

import "strconv"

// State of a claim. The zero value is Idle so that a freshly allocated
// Claim (or one embedded in a zeroed session struct) is ready to AcquireBytes.
type State uint8

const (
	Idle    State = iota // not in any table: new, or released
	Waiting              // queued behind the holder of its lock
	Holding              // the lock's holder, with a fencing token
	Pending              // block mode: the lock's holder-to-be, waiting for its token (blocks.go)
)

// String returns the lower-case name used in logs and the admin API.
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Waiting:
		return "waiting"
	case Holding:
		return "holding"
	case Pending:
		return "pending"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}
