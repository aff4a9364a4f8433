package discovery

import (
	"errors"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// testCurveKey is libzmq's test server public key (40 Z85 characters).
const testCurveKey = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

// TestCurveKeyGossiped: a node's CURVE public key reaches the others in
// its member record and in every instance it offers, and a key that is no
// Z85 text is refused by New and ignored in a peer's tags.
func TestCurveKeyGossiped(t *testing.T) {
	skipShort(t)
	a := newNode(t, "a", func(c *Config) { c.CurveKey = testCurveKey })
	b := newNode(t, "b", func(c *Config) { c.Seeds = []string{a.GossipAddr()} })
	if err := a.AdvertiseSpool("tcp://127.0.0.1:5000", []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Advertise(Service{Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://127.0.0.1:5001"}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "a's key in b's view", waitLong, func() bool {
		st, svc := b.LookupStream("logs"), b.Lookup("api")
		return len(st) == 1 && st[0].CurveKey == testCurveKey && len(svc) == 1 && svc[0].CurveKey == testCurveKey
	})
	for _, m := range b.Members() {
		want := ""
		if m.Name == "a" {
			want = testCurveKey
		}
		if m.CurveKey != want {
			t.Fatalf("member %s has key %q, want %q", m.Name, m.CurveKey, want)
		}
	}
	if _, err := New(Config{NodeName: "c", Profile: ProfileLocal, CurveKey: "short"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a bad key: %v, want ErrInvalid", err)
	}
	if a := decodeTags(map[string]string{curveKeyTag: testCurveKey[:39] + "~"}, ""); a.curveKey != "" {
		t.Fatalf("a malformed key in tags decoded as %q", a.curveKey)
	}
}
