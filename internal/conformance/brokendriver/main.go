// Command brokendriver is a deliberately wrong client with a driver's
// interface, so that a test can show the conformance kit failing a client
// and naming the rule it broke. It speaks the wire protocol itself, follows
// the heartbeat schedule of rule 3 (send to send, lease/4 shortened by twice
// the smoothed RTT, one request in flight) and breaks one rule, chosen with
// -fault:
//
//	slow-heartbeat    heartbeats every lease/2 instead of lease/4
//	no-smoothing      uses the last RTT instead of its EWMA (α = 1, not 0.2)
//	never-give-up     keeps the lock however long answers take
//	close-at-give-up  gives up on time but closes the connection at once,
//	                  while the work still runs
//
// Only never-give-up and close-at-give-up watch for silence at all; the
// others are meant for the heartbeat scenarios.
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
	"sync"
	"time"

	"github.com/monolock/monolock/protocol"
)

func main() {
	fault := flag.String("fault", "slow-heartbeat", "the rule to break: slow-heartbeat, no-smoothing, never-give-up or close-at-give-up")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		os.Exit(2)
	}
	var req struct {
		Address    string `json:"address"`
		NameHex    string `json:"name_hex"`
		LeaseUS    int64  `json:"lease_us"`
		WorkStopMS int64  `json:"work_stop_ms"`
	}
	if err := json.Unmarshal(in.Bytes(), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	name, _ := hex.DecodeString(req.NameHex)
	lease := time.Duration(req.LeaseUS) * time.Microsecond
	base := lease / 4
	if *fault == "slow-heartbeat" {
		base = lease / 2
	}
	floor := min(100*time.Millisecond, lease/4)
	alpha := 5 // 1/α
	if *fault == "no-smoothing" {
		alpha = 1
	}
	conn, err := net.Dial("tcp", req.Address)
	if err != nil {
		fmt.Println(`{"event":"unavailable","reason":"dial"}`)
		return
	}
	leaseMS, _ := protocol.LeaseMS(lease)
	var mu sync.Mutex
	lastSend := time.Now()
	answeredSend := lastSend // send time of the newest answered request
	_, _ = conn.Write(protocol.AppendAcquire(nil, leaseMS, string(name)))
	answers := make(chan time.Time, 16)
	if *fault == "close-at-give-up" {
		go func() {
			for range time.Tick(5 * time.Millisecond) {
				mu.Lock()
				late := time.Since(answeredSend) > lease*4/5
				mu.Unlock()
				if late {
					fmt.Println(`{"event":"lost","reason":"no answer within 0.8 x lease"}`)
					_ = conn.Close() // at once: the work still runs
					time.Sleep(time.Duration(req.WorkStopMS) * time.Millisecond)
					fmt.Println(`{"event":"work-stopped"}`)
					return
				}
			}
		}()
	}
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
			at := time.Now()
			mu.Lock()
			answeredSend = lastSend
			mu.Unlock()
			answers <- at
		}
	}()
	go func() {
		var srtt time.Duration
		sampled := false
		for at := range answers {
			mu.Lock()
			sent := lastSend
			mu.Unlock()
			rtt := at.Sub(sent)
			if !sampled {
				srtt, sampled = rtt, true
			} else {
				srtt += (rtt - srtt) / time.Duration(alpha)
			}
			interval := min(max(base-2*srtt, floor), base)
			time.Sleep(time.Until(sent.Add(interval)))
			mu.Lock()
			lastSend = time.Now()
			mu.Unlock()
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
