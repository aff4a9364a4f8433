package pull_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// TestACLMemberLimit: "limit members" lines parse (version 2 only),
// round-trip through String, refuse mistakes naming the line, and bound a
// client by its own limits, else by those of "*".
func TestACLMemberLimit(t *testing.T) {
	alice, _ := keypair(t)
	bob, _ := keypair(t)
	text := "fastmq-acl 2\nallow read * *\nlimit members 2 " + alice.Z85() + " logs-* audit\nlimit members 8 * logs-*\n" +
		"limit members 5 * logs-a\nlimit members 3 user:carol *\n"
	a, err := pull.ParseACL([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rules) != 1 || len(a.Limits) != 4 || a.Limits[0].Members != 2 || a.Limits[0].Client != alice.Z85() ||
		strings.Join(a.Limits[0].Streams, " ") != "logs-* audit" {
		t.Fatalf("parsed %+v", a)
	}
	if a.String() != text {
		t.Fatalf("String:\n%s\nwant\n%s", a, text)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// Only limits, no grant: still version 2.
	if s := (&pull.ACL{Limits: a.Limits[:1]}).String(); !strings.HasPrefix(s, "fastmq-acl 2\n") {
		t.Fatalf("an ACL with a limit written as %q", s)
	}
	curve := func(k socket.CurveKey) socket.PeerCredentials {
		return socket.PeerCredentials{Mechanism: "CURVE", ClientKey: k}
	}
	for _, c := range []struct {
		cred   socket.PeerCredentials
		stream string
		want   int
	}{
		{curve(alice), "logs-a", 2}, // its own limit, not those of "*"
		{curve(alice), "audit", 2},
		{curve(alice), "other", 0},
		{curve(bob), "logs-b", 8},
		{curve(bob), "logs-a", 5}, // the smallest of those of "*"
		{curve(bob), "audit", 0},
		{socket.PeerCredentials{Mechanism: "PLAIN", Username: "carol"}, "logs-a", 3},
		{socket.PeerCredentials{Mechanism: "PLAIN", Username: "dave"}, "logs-a", 5},
		{socket.PeerCredentials{Mechanism: "NULL"}, "logs-x", 8},
		{socket.PeerCredentials{Mechanism: "NULL"}, "x", 0},
	} {
		if got := a.MemberLimit(c.cred, c.stream); got != c.want {
			t.Errorf("%s %q: limit %d, want %d", c.cred.Mechanism, c.stream, got, c.want)
		}
	}
	if n := (*pull.ACL)(nil).MemberLimit(curve(alice), "logs-a"); n != 0 {
		t.Fatalf("no ACL: limit %d", n)
	}
	// A version 1 file still loads; a limit in it is an error.
	if v1, err := pull.ParseACL([]byte("fastmq-acl 1\nallow * x\n")); err != nil || len(v1.Rules) != 1 || len(v1.Limits) != 0 {
		t.Fatalf("version 1: %+v %v", v1, err)
	}
	for _, tc := range []struct{ text, want string }{
		{"fastmq-acl 1\nlimit members 2 * x\n", `line 2: "limit" needs the header "fastmq-acl 2"`},
		{"fastmq-acl 2\nlimit leases 2 * x\n", `line 2: unknown limit "leases"`},
		{"fastmq-acl 2\nlimit\n", `line 2: unknown limit ""`},
		{"fastmq-acl 2\n\nlimit members 2 *\n", `line 3: "limit members" needs a number, a client and at least one stream pattern`},
		{"fastmq-acl 2\nlimit members two * x\n", `line 2: "limit members": "two" is not a number`},
		{"fastmq-acl 2\nlimit members 0 * x\n", `line 2: "limit members": 0 members, want 1 to`},
		{"fastmq-acl 2\nlimit members -1 * x\n", `line 2: "limit members": -1 members`},
		{"fastmq-acl 2\nlimit members 2 nobody x\n", `line 2: client "nobody" is neither`},
		{"fastmq-acl 2\nlimit members 2 * [x\n", `line 2: stream pattern "[x"`},
	} {
		_, err := pull.ParseACL([]byte(tc.text))
		if !errors.Is(err, pull.ErrBadACL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.text, err, tc.want)
		}
	}
	if err := (&pull.ACL{Limits: []pull.ACLLimit{{Members: 0, Client: "*", Streams: []string{"x"}}}}).Validate(); !errors.Is(err, pull.ErrBadACL) ||
		!strings.Contains(err.Error(), "limit 1") {
		t.Fatalf("Validate of a zero limit: %v", err)
	}
}
