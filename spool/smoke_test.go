package spool

import (
	"context"
	"fmt"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		dir := t.TempDir()
		l, err := Open(Config{Dir: dir, Codec: c, SegmentBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := 0; i < 100; i++ {
			first, err := l.Append(ctx, Record{Value: []byte(fmt.Sprint("v", i))}, Record{Value: []byte("x"), Headers: []Header{{"k", []byte("hv")}}})
			if err != nil || first != uint64(2*i) {
				t.Fatal(first, err)
			}
		}
		r, _ := l.NewReader(0)
		for i := 0; i < 200; i++ {
			rec, err := r.Next(ctx)
			if err != nil || rec.Offset != uint64(i) {
				t.Fatal(rec, err)
			}
		}
		st := l.Stats()
		t.Logf("%+v", st)
		l.Close()
		l, err = Open(Config{Dir: dir, Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		if l.NextOffset() != 200 {
			t.Fatal(l.NextOffset())
		}
		l.Close()
	}
}
