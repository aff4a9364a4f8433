package zmtp

import (
	"bytes"
	"errors"
	"testing"
)

func TestZ85Vectors(t *testing.T) {
	// RFC 32's test vector.
	raw := []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}
	s, err := Z85Encode(raw)
	if err != nil || s != "HelloWorld" {
		t.Fatalf("encode: %q %v", s, err)
	}
	b, err := Z85Decode("HelloWorld")
	if err != nil || !bytes.Equal(b, raw) {
		t.Fatalf("decode: %x %v", b, err)
	}
	// libzmq's test_base85 limits.
	for in, want := range map[string][]byte{"00000": {0, 0, 0, 0}, "%nSc0": {0xff, 0xff, 0xff, 0xff}} {
		if b, err := Z85Decode(in); err != nil || !bytes.Equal(b, want) {
			t.Errorf("decode %q: %x %v", in, b, err)
		}
	}
	for _, bad := range []string{"", "0", "01234567", "#####", "%nSc1", "####\x047", "####\x800", "####\x1f7", "abc d"} {
		if _, err := Z85Decode(bad); !errors.Is(err, ErrZ85) {
			t.Errorf("decode %q: %v, want ErrZ85", bad, err)
		}
	}
	if _, err := Z85Encode([]byte{1, 2, 3}); !errors.Is(err, ErrZ85) {
		t.Errorf("encode of 3 bytes: %v", err)
	}
	// Round trip of a regular libzmq key text.
	const k = "r^/rM9M=rMToK)63O8dCvd9D<PY<7iGlC+{BiSnG"
	b, err = Z85Decode(k)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := Z85Encode(b); s != k {
		t.Fatalf("round trip %q -> %q", k, s)
	}
}
