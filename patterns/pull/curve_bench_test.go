package pull_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// BenchmarkCatchUpCurve measures what CURVE costs a consumer catching up:
// b.N records already in the spool (codec none, so every byte of the
// values is encrypted) pulled over tcp loopback, with NULL security and
// with CURVE (the server accepting any client key, as a node's does once
// it has checked the key); an ACL of one rule is in place in the CURVE
// runs, as on a node with one.
func BenchmarkCatchUpCurve(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, curve := range []bool{false, true} {
			name := fmt.Sprintf("%dB/null", size)
			if curve {
				name = fmt.Sprintf("%dB/curve", size)
			}
			b.Run(name, func(b *testing.B) {
				l, err := spool.Open(spool.Config{Dir: b.TempDir(), Sync: spool.SyncNone, Codec: spool.CodecNone})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				value := make([]byte, size)
				for i := range value {
					value[i] = 'a' + byte(i%26)
				}
				recs := make([]spool.Record, 1024)
				for left := b.N; left > 0; left -= min(left, len(recs)) {
					k := min(left, len(recs))
					for i := range recs[:k] {
						recs[i] = spool.Record{Value: value}
					}
					if _, err := l.Append(context.Background(), recs[:k]...); err != nil {
						b.Fatal(err)
					}
				}
				scfg := pull.ServerConfig{Lookup: func(string) (*spool.Log, bool) { return l, true }}
				var ccfg socket.Config
				if curve {
					spub, ssec := keypair(b)
					cpub, csec := keypair(b)
					scfg.Socket = socket.Config{CurveServer: true, CurveSecretKey: ssec, CurveAllowAnyClient: true}
					scfg.ACL = &pull.ACL{Rules: []pull.ACLRule{{Client: cpub.Z85(), Streams: []string{"*"}}}}
					ccfg = socket.Config{CurveServerKey: spub, CurveSecretKey: csec}
				}
				srv, err := pull.NewServer(scfg)
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				c, err := pull.NewConsumer(pull.ConsumerConfig{Stream: "s", Publishers: map[string]string{"p": srv.Endpoints()[0]},
					MaxBytes: 4 << 20, Buffer: 16, Socket: ccfg})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				for i := 0; i < b.N; i++ {
					m, err := c.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					c.Ack(m)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
