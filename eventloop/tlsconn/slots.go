package tlsconn

// cpuSlots bounds the TLS handshakes computing at once (Config.MaxHandshakes).
type cpuSlots chan struct{}

func (s cpuSlots) take() { s <- struct{}{} }

func (s cpuSlots) give() { <-s }

// cpuSlot is one handshake goroutine's share of the slots: it holds one only
// while it has input to work on, so waiting for a slot is waiting for the
// CPU, never for a slow client, and a stalled client keeps nobody waiting.
// Only the handshake goroutine touches it.
type cpuSlot struct {
	slots   cpuSlots
	holding bool
}

// hold takes a slot unless it holds one already.
func (c *cpuSlot) hold() {
	if !c.holding {
		c.slots.take()
		c.holding = true
	}
}

// release gives the slot back; held reports that it held one, that is, that
// the server's turn ends here.
func (c *cpuSlot) release() (held bool) {
	if !c.holding {
		return false
	}
	c.slots.give()
	c.holding = false
	return true
}
