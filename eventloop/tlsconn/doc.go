// Package tlsconn is a TLS session on monolock's event loop. It turns what a
// connection carries into what the loop's owner acts on, and never calls the
// owner: a turn hands it the connection and the turn's time (HandshakeTurn),
// and it answers with an Event — nothing yet, the session opened with the
// client's identity, the handshake refused with crypto/tls's reason, or the
// connection to close and why. Once open, a Conn is the plaintext stream the
// owner parses frames from (Peek, Discard) and writes records to (Write).
//
// A session lives in the loop like a plain one: one descriptor, no
// goroutine. Only its handshake, which crypto/tls cannot suspend and
// resume, runs on a goroutine of its own (handshake.go); the jobs between
// the loop and that goroutine are one type each: the client's bytes
// (pipe.go), what the client may send at each point (budget.go), the
// compute slots (slots.go), whose turn it is for io-timeout (clock.go), and
// the result (outcome, handshake.go). Records and the ClientHello are read
// in record.go; the bounds on an open session's records in bounds.go.
package tlsconn
