package socket

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bind bool
		ok   bool
		want string
	}{
		{"tcp://127.0.0.1:5555", false, true, "tcp://127.0.0.1:5555"},
		{"TCP://[::1]:5555", false, true, "tcp://[::1]:5555"},
		{"tcp://*:0", true, true, "tcp://*:0"},
		{"tcp://*:*", true, true, "tcp://*:0"},
		{"tcp://*:*", false, false, ""},
		{"tcp://127.0.0.1:0", false, false, ""},
		{"tcp://127.0.0.1:70000", true, false, ""},
		{"tcp://localhost", false, false, ""},
		{"ipc:///tmp/x.sock", false, true, "ipc:///tmp/x.sock"},
		{"inproc://name", true, true, "inproc://name"},
		{"inproc://", true, false, ""},
		{"pgm://x", false, false, ""},
		{"127.0.0.1:5555", false, false, ""},
	} {
		e, err := parseEndpoint(tc.in, tc.bind)
		if (err == nil) != tc.ok {
			t.Errorf("parseEndpoint(%q, %v): %v", tc.in, tc.bind, err)
			continue
		}
		if tc.ok && e.String() != tc.want {
			t.Errorf("parseEndpoint(%q) = %q, want %q", tc.in, e, tc.want)
		}
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"tcp://127.0.0.1:5555", "tcp://*:0", "ipc:///tmp/a", "inproc://x", "tcp://[::1]:1", "tcp://:"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, bind bool) {
		e, err := parseEndpoint(s, bind)
		if err != nil {
			return
		}
		// A parsed endpoint re-parses to itself.
		e2, err := parseEndpoint(e.String(), bind)
		if err != nil || e2 != e {
			t.Fatalf("%q -> %q -> %q, %v", s, e, e2, err)
		}
		if !strings.Contains(e.String(), "://") {
			t.Fatalf("%q: no scheme in %q", s, e)
		}
	})
}
