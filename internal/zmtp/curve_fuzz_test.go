package zmtp

import (
	"bytes"
	"io"
	"testing"
)

// FuzzCurveHandshake feeds arbitrary bytes after a CURVE greeting to a
// CURVE server and client: any outcome but a panic or a hang is fine.
func FuzzCurveHandshake(f *testing.F) {
	g := Greeting{Major: 3, Minor: 1, Mechanism: MechanismCurve}.Marshal()
	hello := append([]byte{FlagCommand, 200, 5}, "HELLO"...)
	hello = append(hello, make([]byte, helloBodySize)...)
	hello[7] = 1
	f.Add(append(g[:], hello...))
	welcome := append([]byte{FlagCommand, 168, 7}, "WELCOME"...)
	f.Add(append(g[:], append(welcome, make([]byte, welcomeBodySize)...)...))
	f.Add(append(g[:], FlagCommand|FlagLong, 0, 0, 0, 0, 0, 0, 1, 1, 8, 'I', 'N', 'I', 'T', 'I', 'A', 'T', 'E'))
	ss, cs := testKeys(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, cfg := range []Config{
			{SocketType: "REP", Curve: &CurveConfig{Server: true, SecretKey: ss}},
			{SocketType: "REQ", Curve: &CurveConfig{SecretKey: cs, ServerKey: PublicKey(ss)}},
		} {
			rw := struct {
				io.Reader
				io.Writer
			}{bytes.NewReader(b), io.Discard}
			_, _ = Handshake(NewReader(rw, 0), NewWriter(rw, 0), cfg)
		}
	})
}

// FuzzCurveMessage feeds arbitrary traffic to a Reader after a CURVE
// handshake, both through Complete (decrypting ahead) and Next. Genuine
// MESSAGE frames from the seed corpus decrypt; nothing may panic.
func FuzzCurveMessage(f *testing.F) {
	cc, sc := curveConfigs(f)
	_, cw, sr, _, _, _ := curvePair(f, cc, sc)
	var wire bytes.Buffer
	cw.wr = &wire
	_ = cw.WriteMessage([][]byte{[]byte("a"), {}, bytes.Repeat([]byte("b"), 300)})
	_ = cw.WriteCommand(CmdPing, AppendPing(nil, 10, []byte("c")))
	_ = cw.Flush()
	f.Add(wire.Bytes())
	f.Add([]byte{FlagCommand, 8, 7, 'M', 'E', 'S', 'S', 'A', 'G', 'E'})
	f.Add([]byte{FlagCommand, 7, 5, 'E', 'R', 'R', 'O', 'R', 0})
	f.Add([]byte{FlagCommand | FlagLong, 0x40, 0, 0, 0, 0, 0, 0, 0})
	key, last := sr.curve.key, sr.curve.last
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, peek := range []bool{false, true} {
			r := NewReader(bytes.NewReader(b), 16)
			r.MaxMsgSize, r.MaxFrames = 1<<20, 100
			r.curve = &curveIn{key: key, last: last}
			copy(r.curve.prefix[:], "CurveZMQMESSAGEC")
			for range 100 {
				if peek {
					r.Complete()
				}
				if _, _, err := r.Next(nil); err != nil {
					break
				}
			}
		}
	})
}
