package zmtp

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// BenchmarkCurveCodec measures encrypting and decrypting one-frame
// messages through a Writer and a Reader, against the same with NULL.
func BenchmarkCurveCodec(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, curve := range []bool{false, true} {
			name := map[bool]string{false: "null", true: "curve"}[curve]
			b.Run(fmt.Sprintf("%s/%dB", name, size), func(b *testing.B) {
				var wire bytes.Buffer
				w := NewWriter(&wire, 0)
				var in *curveIn
				if curve {
					cc, sc := curveConfigs(b)
					_, cw, sr, _, _, _ := curvePair(b, cc, sc)
					w.curve, in = cw.curve, sr.curve
				}
				payload := [][]byte{make([]byte, size)}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				const batch = 256
				for i := 0; i < b.N; i += batch {
					wire.Reset()
					n := min(batch, b.N-i)
					for range n {
						_ = w.WriteMessage(payload)
					}
					_ = w.Flush()
					r := NewReader(bytes.NewReader(wire.Bytes()), 0)
					r.curve = in
					for range n {
						if _, _, err := r.Next(nil); err != nil && err != io.EOF {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
