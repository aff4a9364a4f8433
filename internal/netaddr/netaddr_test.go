package netaddr_test

import (
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/netaddr"
)

// TestResolve: the defaults on loopback, the spool following a wildcard
// gossip bind, and the loopback addresses refused toward a remote mesh.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        netaddr.Addrs
		gossip    string
		spool     string
		wantError string
	}{
		{name: "zero", gossip: "127.0.0.1:0", spool: "tcp://127.0.0.1:0"},
		{name: "loopback seeds", in: netaddr.Addrs{Seeds: []string{"127.0.0.1:7946"}}, gossip: "127.0.0.1:0", spool: "tcp://127.0.0.1:0"},
		{name: "wildcard gossip", in: netaddr.Addrs{Gossip: "0.0.0.0:7946"}, gossip: "0.0.0.0:7946", spool: "tcp://0.0.0.0:0"},
		{name: "explicit spool kept", in: netaddr.Addrs{SpoolEndpoints: []string{"tcp://127.0.0.1:5555"}}, gossip: "127.0.0.1:0", spool: "tcp://127.0.0.1:5555"},
		{name: "loopback gossip, remote seed", in: netaddr.Addrs{Gossip: "127.0.0.1:0", Seeds: []string{"192.0.2.1:7946"}}, wantError: "cannot be reached from seed"},
		{name: "loopback spool, remote gossip", in: netaddr.Addrs{Gossip: "192.0.2.10:7946", SpoolEndpoints: []string{"tcp://127.0.0.1:0"}}, wantError: "remote consumers could not reach it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := netaddr.Resolve(tc.in)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Gossip != tc.gossip || len(out.SpoolEndpoints) != 1 || out.SpoolEndpoints[0] != tc.spool {
				t.Fatalf("resolved %+v, want gossip %s and spool %s", out, tc.gossip, tc.spool)
			}
		})
	}
	if got := netaddr.HostOf("[::1]:80"); got != "::1" {
		t.Errorf("HostOf([::1]:80) = %q", got)
	}
	if got := netaddr.HostOf("nohost"); got != "" {
		t.Errorf("HostOf(nohost) = %q, want empty", got)
	}
}
