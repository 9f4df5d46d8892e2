package locktable

// ReleaseReason says why a session ended, and so why its holder, if any,
// stopped holding. The loop decides it; metrics index their series by it
// and the audit log prints its name. The names below are the only place the
// reasons are spelled.
type ReleaseReason uint8

// The release reasons.
const (
	ReleaseGraceful      ReleaseReason = iota // the client closed its connection (FIN or RST)
	ReleaseExpired                            // no heartbeat within the lease
	ReleaseIOTimeout                          // no ACQUIRE, a half-sent frame or undrained output for io-timeout
	ReleaseForce                              // an administrator's force-release or kick
	ReleaseShutdown                           // the server shut down
	ReleaseProtocolError                      // the client broke the protocol
	ReleaseFrame                              // the client sent RELEASE, and the server closed first
	ReleaseDemoted                            // the server's node stopped leading its cluster (failover through etcd)
	ReleaseReasons                            // how many reasons there are
)

var releaseReasonNames = [ReleaseReasons]string{"graceful", "expired", "io_timeout", "force", "shutdown", "protocol_error", "released", "demoted"}

// String is the reason's name in metrics labels and audit events.
func (r ReleaseReason) String() string {
	if r < ReleaseReasons {
		return releaseReasonNames[r]
	}
	return "unknown"
}
