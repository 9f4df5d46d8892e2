//go:build !linux

package opshttp

import "net"

// unread is not measured off Linux: a connection the server has not read
// from counts as silent.
func unread(net.Conn) bool { return false }
