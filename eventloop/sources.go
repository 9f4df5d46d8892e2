package eventloop

import (
	"net"
	"net/netip"
)

// A source is where connections come from, as far as sharing the
// descriptors at the limit goes (admission.go): an IPv4 address, or an
// IPv6 /64. One host on IPv6 gets a whole /64 (SLAAC, privacy addresses
// that change every day), so one address per source would let a single
// host count as 2^64 of them; a /64 is what one subscriber or one
// interface is given, and what per-address limits in front of servers
// group IPv6 by. An IPv4 client of a dual-stack socket is its IPv4
// address.
type sourceKey [16]byte

// sourceOf returns addr's source; nil or a non-TCP address is the zero
// key (one source for all of them). It allocates nothing.
func sourceOf(addr net.Addr) sourceKey {
	var k sourceKey
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp == nil {
		return k
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return k
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return netip.AddrFrom4(ip.As4()).As16() // ::ffff:a.b.c.d
	}
	k = ip.As16()
	clear(k[8:]) // the /64
	return k
}

// source counts one source's sessions that are not holders (waiters, and
// connections that have not sent ACQUIRE) and links them, oldest first, so
// that its newest is found at once. It exists while it has any session,
// holders included.
type source struct {
	chain      // its non-holders, oldest first: the newest is its tail
	key        sourceKey
	count      int     // its sessions that are not holders
	sessions   int     // all its sessions
	prev, next *source // the other sources with the same count (sourceTable.byCount)
}

// sourceTable is every source with a session, kept by how many sessions
// that are not holders each has, so that the one with the most is found
// at once. A count moves by one at a time, so every change costs the same whatever
// the number of sources or sessions: a map lookup when a session opens,
// and a few pointers when it is granted its lock or closes. Freed entries
// are reused, so a source coming and going allocates nothing after the
// first.
type sourceTable struct {
	byKey   map[sourceKey]*source
	byCount []*source // byCount[n]: the sources with n non-holders, linked; [0] is unused
	most    int       // the largest count; 0 when there is no source
	free    *source   // entries to reuse, linked by next
}

// join counts s, a new session, as one of key's non-holders, its newest.
func (t *sourceTable) join(s *session, key sourceKey) {
	src := t.byKey[key]
	if src == nil {
		if t.byKey == nil {
			t.byKey = make(map[sourceKey]*source)
		}
		src = t.free
		if src != nil {
			t.free = src.next
			*src = source{}
		} else {
			src = &source{}
		}
		src.key = key
		t.byKey[key] = src
	}
	s.src = src
	src.sessions++
	src.link(s, src.tail, bySource)
	s.holds = false
	t.move(src, src.count+1)
}

// holds stops counting s, granted its lock, as a non-holder.
func (t *sourceTable) holds(s *session) {
	if s.holds || s.src == nil {
		return
	}
	s.holds = true
	s.src.unlink(s, bySource)
	t.move(s.src, s.src.count-1)
}

// leave forgets s, closed.
func (t *sourceTable) leave(s *session) {
	src := s.src
	if src == nil {
		return
	}
	t.holds(s)
	s.src = nil
	if src.sessions--; src.sessions == 0 {
		delete(t.byKey, src.key)
		src.next, t.free = t.free, src
	}
}

// alone reports whether no source but key has a session.
func (t *sourceTable) alone(key sourceKey) bool {
	switch len(t.byKey) {
	case 0:
		return true
	case 1:
		return t.byKey[key] != nil
	}
	return false
}

// count returns how many non-holders key has.
func (t *sourceTable) count(key sourceKey) int {
	if src := t.byKey[key]; src != nil {
		return src.count
	}
	return 0
}

// top returns a source with the most non-holders, nil when none has any.
func (t *sourceTable) top() *source {
	if t.most == 0 {
		return nil
	}
	return t.byCount[t.most]
}

// leads reports whether top, a source with the most, has two or more
// than every other source, and there is another.
func (t *sourceTable) leads(top *source) bool {
	if len(t.byKey) < 2 || top.count < 2 || top.prev != nil || top.next != nil { // another has as many
		return false
	}
	return t.byCount[top.count-1] == nil // none has one less; the rest, with none, count too
}

// move changes src's count to n (one more or one less than it was).
func (t *sourceTable) move(src *source, n int) {
	if src.count > 0 {
		if src.prev != nil {
			src.prev.next = src.next
		} else {
			t.byCount[src.count] = src.next
		}
		if src.next != nil {
			src.next.prev = src.prev
		}
	}
	src.prev, src.next = nil, nil
	src.count = n
	if n > 0 {
		for len(t.byCount) <= n {
			t.byCount = append(t.byCount, nil)
		}
		src.next = t.byCount[n]
		if src.next != nil {
			src.next.prev = src
		}
		t.byCount[n] = src
	}
	switch {
	case n > t.most:
		t.most = n
	case t.most > 0 && t.byCount[t.most] == nil: // src was the last with the most: it has one less now
		t.most--
	}
}
