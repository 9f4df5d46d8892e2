package haetcd

import "time"

// SetSleepUntil replaces how n waits before giving its key up (holdKey):
// a test holds the give-up in its hand.
func SetSleepUntil(n *Node, sleep func(until time.Time)) { n.sleepUntil = sleep }
