package certs

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// TicketKeyLen is the length of one session-ticket key: crypto/tls derives
// the ticket's encryption and MAC keys from these 32 bytes.
const TicketKeyLen = 32

// ticketKeyHint says how to make a good key file, for every error about one.
const ticketKeyHint = "write one key a line, each 32 random bytes in base64, as `openssl rand -base64 32` prints; the first line issues tickets, the others are still accepted"

// LoadTicketKeys reads a session-ticket key file: one key a line, 32 random
// bytes in standard base64, the first one encrypting new tickets and every
// one decrypting (so that a rotation adds the new key on top and keeps the
// previous one below it for a while). Blank lines and lines starting with
// '#' are skipped. Two servers with the same file resume each other's
// sessions; a server restarted with it resumes its own.
func LoadTicketKeys(path string) ([][TicketKeyLen]byte, error) {
	data, err := readFile("session-ticket key file", path)
	if err != nil {
		return nil, err
	}
	var keys [][TicketKeyLen]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		raw := make([]byte, base64.StdEncoding.DecodedLen(len(line)))
		n, err := base64.StdEncoding.Decode(raw, line)
		if err != nil {
			return nil, fmt.Errorf("session-ticket key file %s, line %d: not base64 (%v); %s", path, i+1, err, ticketKeyHint)
		}
		if n != TicketKeyLen {
			return nil, fmt.Errorf("session-ticket key file %s, line %d: the key is %d bytes, want %d; %s", path, i+1, n, TicketKeyLen, ticketKeyHint)
		}
		var k [TicketKeyLen]byte
		copy(k[:], raw[:n])
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("session-ticket key file " + path + " holds no key; " + ticketKeyHint)
	}
	return keys, nil
}
