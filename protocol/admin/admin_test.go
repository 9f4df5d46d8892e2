package admin_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol/admin"
)

// TestFieldNames pins the JSON names: they are the API that scripts and
// monolockctl of other versions read, so renaming a field breaks them.
func TestFieldNames(t *testing.T) {
	at := time.Date(2026, 11, 30, 7, 5, 25, 582809109, time.UTC)
	for _, c := range []struct {
		v    any
		want string
	}{
		{admin.LockInfo{
			Name:    "nightly/import",
			Holder:  admin.HolderInfo{Identity: "spiffe://prod/a", RemoteAddr: "127.0.0.1:57286", Since: at, LeaseMS: 30000, Token: 1<<62 + 1},
			Waiters: []admin.WaiterInfo{{Identity: "", RemoteAddr: "127.0.0.1:57298", QueuedAt: at}},
		}, `{"name":"nightly/import","holder":{"identity":"spiffe://prod/a","remote_addr":"127.0.0.1:57286","since":"2026-11-30T07:05:25.582809109Z","lease_ms":30000,"token":4611686018427387905},"waiters":[{"identity":"","remote_addr":"127.0.0.1:57298","queued_at":"2026-11-30T07:05:25.582809109Z"}]}`},
		{admin.ServerInfo{
			Version: "v1", UptimeMS: 5, Locks: 1, Sessions: 2, Waiters: 3,
			Config: admin.ServerConfig{Listen: "l", OpsListen: "o", TLS: true, MTLS: true, ACLFile: "a", AuditLog: "-", IOTimeoutMS: 7},
		}, `{"version":"v1","uptime_ms":5,"config":{"listen":"l","ops_listen":"o","tls":true,"mtls":true,"acl_file":"a","audit_log":"-","io_timeout_ms":7},"locks":1,"sessions":2,"waiters":3}`},
		{admin.LockList{Locks: []admin.LockInfo{{Name: "a"}}}, `{"locks":[{"name":"a","holder":{"identity":"","remote_addr":"","since":"0001-01-01T00:00:00Z","lease_ms":0,"token":0},"waiters":null}]}`},
		{admin.ReleaseResponse{Lock: "x", ReleasedToken: 9}, `{"lock":"x","released_token":9}`},
		{admin.KickResponse{Lock: "x", Kicked: "127.0.0.1:1"}, `{"lock":"x","kicked":"127.0.0.1:1"}`},
		{admin.ErrorResponse{Error: "e"}, `{"error":"e"}`},
		{admin.WhoAmI{Identity: "spiffe://prod/oncall/ana", Roles: []string{admin.RoleRead, admin.RoleRelease, admin.RoleKick}}, `{"identity":"spiffe://prod/oncall/ana","roles":["read","release","kick"]}`},
		{admin.WhoAmI{Identity: "", Roles: []string{}}, `{"identity":"","roles":[]}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		if string(b) != c.want {
			t.Errorf("%T encodes as\n%s\nwant\n%s", c.v, b, c.want)
		}
	}
}

// TestTokenRoundTrip: a token above 2^53 survives decoding exactly.
func TestTokenRoundTrip(t *testing.T) {
	var l admin.LockInfo
	if err := json.Unmarshal([]byte(`{"holder":{"token":7713857148760883201}}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Holder.Token != 7713857148760883201 {
		t.Errorf("token decoded as %d, want 7713857148760883201", l.Holder.Token)
	}
}
