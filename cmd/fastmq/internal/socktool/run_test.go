package socktool

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzIdentity checks that every routing id the router tool prints parses
// back to the same bytes, and that parsing never panics.
func FuzzIdentity(f *testing.F) {
	for _, seed := range []string{"", "d1", "0x", "0xbin", "\x00\x01abc", "with space", "0x00ff", "0xzz"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		shown := FormatIdentity(id)
		back, err := ParseIdentity([]byte(shown))
		if err != nil {
			t.Fatalf("ParseIdentity(%q) of %q: %v", shown, id, err)
		}
		if !bytes.Equal(back, id) {
			t.Fatalf("identity %q shown as %q parses back to %q", id, shown, back)
		}
		if strings.ContainsAny(shown, "\t\n") {
			t.Fatalf("identity %q shown as %q, which breaks the line format", id, shown)
		}
		ParseIdentity(id) // arbitrary input: error or value, no panic
	})
}
