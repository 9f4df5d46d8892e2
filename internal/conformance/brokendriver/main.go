// Command brokendriver is a deliberately wrong client with a driver's
// interface, so that a test can show the conformance kit failing a client
// and naming the rule it broke. It speaks the wire protocol itself and
// breaks one rule, chosen with -fault:
//
//	slow-heartbeat   heartbeats every lease/2 instead of lease/4
//	never-give-up    keeps the lock and heartbeats however long answers take
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/monolock/monolock/protocol"
)

func main() {
	fault := flag.String("fault", "slow-heartbeat", "the rule to break: slow-heartbeat or never-give-up")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		os.Exit(2)
	}
	var req struct {
		Address string `json:"address"`
		NameHex string `json:"name_hex"`
		LeaseUS int64  `json:"lease_us"`
	}
	if err := json.Unmarshal(in.Bytes(), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	name, _ := hex.DecodeString(req.NameHex)
	lease := time.Duration(req.LeaseUS) * time.Microsecond
	interval := lease / 4
	if *fault == "slow-heartbeat" {
		interval = lease / 2
	}
	conn, err := net.Dial("tcp", req.Address)
	if err != nil {
		fmt.Println(`{"event":"unavailable","reason":"dial"}`)
		return
	}
	leaseMS, _ := protocol.LeaseMS(lease)
	_, _ = conn.Write(protocol.AppendAcquire(nil, leaseMS, string(name)))
	answers := make(chan struct{}, 16)
	go func() {
		var buf protocol.FrameBuffer
		var f protocol.Frame
		r := bufio.NewReader(conn)
		granted := false
		for protocol.ReadServerFrame(r, &buf, &f) == nil {
			if f.Type == protocol.TypeAcquired && !granted {
				granted = true
				fmt.Printf("{\"event\":\"acquired\",\"token\":\"%s\"}\n", strconv.FormatUint(f.Token, 10))
			}
			answers <- struct{}{}
		}
	}()
	go func() {
		// One heartbeat per answer, interval after the previous send; it
		// never gives up, however long an answer takes.
		for range answers {
			time.Sleep(interval)
			if _, err := conn.Write([]byte{byte(protocol.TypeHeartbeat)}); err != nil {
				return
			}
		}
	}()
	for in.Scan() {
		_ = conn.Close()
		fmt.Println(`{"event":"released"}`)
	}
	_ = conn.Close()
	_, _ = io.Copy(io.Discard, os.Stdin)
}
