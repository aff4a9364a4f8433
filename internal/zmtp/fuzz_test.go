package zmtp

import (
	"bytes"
	"io"
	"testing"
)

func FuzzGreeting(f *testing.F) {
	for _, g := range []Greeting{{Major: 3, Minor: 1, Mechanism: "NULL"}, {Major: 3, Minor: 0, Mechanism: "PLAIN", AsServer: true}} {
		b := g.Marshal()
		f.Add(b[:])
	}
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGreeting(b)
		if err != nil {
			return
		}
		m := g.Marshal()
		g2, err := ParseGreeting(m[:])
		if err != nil || g2 != g {
			t.Fatalf("round trip: %+v -> %+v, %v", g, g2, err)
		}
	})
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	_ = w.WriteMessage([][]byte{[]byte("a"), {}, bytes.Repeat([]byte("b"), 300)})
	_ = w.WriteCommand(CmdPing, AppendPing(nil, 10, []byte("c")))
	_ = w.WriteCommand(CmdReady, []byte("\x0bSocket-Type\x00\x00\x00\x04PUSH"))
	_ = w.Flush()
	f.Add(buf.Bytes())
	f.Add([]byte{FlagLong, 0x40, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{FlagCommand, 6, 5, 'R', 'E', 'A', 'D', 'Y', 0})
	f.Add([]byte{FlagMore, 1, 'a', FlagCommand, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), 16)
		r.MaxMsgSize = 1 << 16
		for range len(b) + 1 { // each Next consumes at least one byte
			frames, cmd, err := r.Next(nil)
			if err != nil {
				return
			}
			if frames == nil && cmd.Name == "" {
				t.Fatal("neither message nor command")
			}
		}
		t.Fatal("reader did not stop")
	})
}

func FuzzCommand(f *testing.F) {
	f.Add([]byte("\x05READY\x0bSocket-Type\x00\x00\x00\x04PUSH\x08Identity\x00\x00\x00\x00"))
	f.Add([]byte("\x05READY\x00"))
	f.Add([]byte("\x04PING\x00\x0aabc"))
	f.Add([]byte("\x05ERROR\x03bad"))
	f.Add([]byte("\x5eRROR\x03400"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := ParseCommand(b)
		if err != nil {
			return
		}
		switch cmd.Name {
		case CmdPing:
			_, _, _ = ParsePing(cmd.Body)
		case CmdError:
			_, _ = ParseError(cmd.Body)
		case CmdHello:
			_, _, _ = ParseHello(cmd.Body)
		}
		md, err := ParseMetadata(cmd.Body)
		if err != nil {
			return
		}
		enc, err := AppendMetadata(nil, md)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, cmd.Body) {
			t.Fatalf("metadata round trip differs")
		}
		_, _ = md.Get(PropSocketType)
	})
}

func FuzzHello(f *testing.F) {
	h, _ := AppendHello(nil, "admin", "secret")
	f.Add(h)
	f.Add([]byte{0, 0})
	f.Add([]byte{5, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, p, err := ParseHello(b)
		if err != nil {
			return
		}
		enc, err := AppendHello(nil, u, p)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("round trip differs: %v", err)
		}
	})
}

// FuzzHandshake feeds arbitrary peer bytes to both roles of both
// mechanisms: any outcome but a panic or a hang is fine.
func FuzzHandshake(f *testing.F) {
	g := Greeting{Major: 3, Minor: 1, Mechanism: "NULL"}.Marshal()
	f.Add(append(g[:], FlagCommand, 6, 5, 'R', 'E', 'A', 'D', 'Y', 0))
	p := Greeting{Major: 3, Minor: 1, Mechanism: "PLAIN"}.Marshal()
	f.Add(append(p[:], FlagCommand, 10, 5, 'H', 'E', 'L', 'L', 'O', 1, 'u', 1, 'p'))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, cfg := range []Config{
			{SocketType: "PULL"},
			{SocketType: "REP", Auth: func(u, p string) bool { return u == "u" }},
			{SocketType: "REQ", Username: "u", Password: "p"},
		} {
			rw := struct {
				io.Reader
				io.Writer
			}{bytes.NewReader(b), io.Discard}
			_, _ = Handshake(NewReader(rw, 0), NewWriter(rw, 0), cfg)
		}
	})
}
