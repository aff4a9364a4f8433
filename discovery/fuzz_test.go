package discovery

import (
	"slices"
	"testing"
)

// FuzzDecodeService checks that arbitrary peer tags never panic and that
// whatever decodes re-encodes to an equivalent advertisement.
func FuzzDecodeService(f *testing.F) {
	for _, s := range []struct{ name, value, host string }{
		{"jobs", "PULL|:5557", "10.0.0.5"},
		{"api", "ROUTER|10.0.0.9:1,ipc:///run/api", "10.0.0.5"},
		{"x", "REP|inproc://x", ""},
		{"x", "REP|", ""},
		{"", "|", ""},
		{"v6", "REP|:80", "::1"},
		{"bad", "REP|a,,b", "h"},
		{"u", "REP|\xff\xfe", "h"},
	} {
		f.Add(s.name, s.value, s.host)
	}
	f.Fuzz(func(t *testing.T, name, value, host string) {
		svc, ok := decodeService(name, value, host)
		if !ok {
			return
		}
		if err := validateService(svc); err != nil {
			t.Fatalf("decoded invalid service %+v: %v", svc, err)
		}
		k, v := encodeService(svc, host)
		again, ok := decodeService(k[len(serviceKey):], v, host)
		if !ok || again.Name != svc.Name || again.Kind != svc.Kind || !slices.Equal(again.Endpoints, svc.Endpoints) {
			t.Fatalf("round trip %+v -> %q -> %+v (%v)", svc, v, again, ok)
		}
	})
}

// FuzzDecodeSpool does the same for the spool advertisement.
func FuzzDecodeSpool(f *testing.F) {
	for _, s := range []struct{ value, host string }{
		{":6000|access-log,audit", "10.0.0.5"},
		{"10.0.0.6:1|", "10.0.0.5"},
		{"ipc:///x|a", ""},
		{"|a", ""},
		{":1|a,,b", "h"},
	} {
		f.Add(s.value, s.host)
	}
	f.Fuzz(func(t *testing.T, value, host string) {
		ad, ok := decodeSpool(value, host)
		if !ok {
			return
		}
		if err := validateSpool(ad.Endpoint, ad.Streams); err != nil {
			t.Fatalf("decoded invalid spool %+v: %v", ad, err)
		}
		again, ok := decodeSpool(encodeSpool(ad, host), host)
		if !ok || again.Endpoint != ad.Endpoint || !slices.Equal(again.Streams, ad.Streams) {
			t.Fatalf("round trip %+v -> %+v (%v)", ad, again, ok)
		}
	})
}

// FuzzParseLogLine checks the serf/memberlist log adapter on arbitrary lines.
func FuzzParseLogLine(f *testing.F) {
	for _, s := range []string{"[DEBUG] memberlist: x", "[ERR] serf: y", "[", "[]", "plain", "[WARN]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, c, _ := parseLogLine(s)
		if c == "" {
			t.Fatal("empty component")
		}
	})
}

// FuzzMembersPage feeds the members query's answer decoder arbitrary
// bytes: it returns an error or a page that encodes back to a decodable
// answer, never panics.
func FuzzMembersPage(f *testing.F) {
	f.Add([]byte{1, 1, 1, 'a', 9, '1', '.', '2', ':', '3', '4', '5', '6', 3, 0, 1, 1, 'k', 1, 'v'})
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 0, 1, 'a', 0, 4, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeMembersPage(b)
		if err != nil {
			return
		}
		out := []byte{membersWireVersion, 0}
		for _, w := range p.members {
			out = appendWireMember(out, w)
		}
		if _, err := decodeMembersPage(out); err != nil {
			t.Fatalf("re-encoded page %+v does not decode: %v", p, err)
		}
	})
}
