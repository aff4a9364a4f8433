package pull

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/fastmq/fastmq/spool"
)

// storedBatches returns three stored batches of the given records each,
// as a server reads them, starting at offset 0.
func storedBatches(tb testing.TB, per int) []byte {
	tb.Helper()
	l, err := spool.Open(spool.Config{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	for b := 0; b < 3; b++ {
		recs := make([]spool.Record, per)
		for i := range recs {
			recs[i].Value = []byte("value")
		}
		if _, err := l.Append(context.Background(), recs...); err != nil {
			tb.Fatal(err)
		}
	}
	data, _, err := l.ReadRaw(0, 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestCheckRaw checks what a server sends of stored batches: all of them
// when valid, the valid ones before damage, an error when the first is
// damaged, and a gap when the first starts above the requested offset.
func TestCheckRaw(t *testing.T) {
	data := storedBatches(t, 4) // offsets 0..3, 4..7, 8..11
	if got, next, err := checkRaw(data, 2); err != nil || next != 12 || !bytes.Equal(got, data) {
		t.Fatalf("valid: %d bytes, next %d, %v", len(got), next, err)
	}
	size := len(data) / 3
	bad := bytes.Clone(data)
	bad[size+rawHeaderLen] ^= 1 // the second batch's payload
	if got, next, err := checkRaw(bad, 0); err != nil || next != 4 || len(got) != size {
		t.Fatalf("damaged second batch: %d bytes, next %d, %v", len(got), next, err)
	}
	if got, next, err := checkRaw(bad[size:], 4); err == nil || got != nil || next != 4 {
		t.Fatalf("damaged first batch: %d bytes, next %d, %v", len(got), next, err)
	}
	var gap *gapError
	if got, next, err := checkRaw(data[2*size:], 5); !errors.As(err, &gap) || gap.from != 5 || gap.next != 8 || next != 12 || len(got) != size {
		t.Fatalf("gap: %d bytes, next %d, %v", len(got), next, err)
	}
	if _, _, err := checkRaw(data, 12); err == nil {
		t.Fatal("batches all before the requested offset were accepted")
	}
}

// FuzzCheckRaw checks that no input panics checkRaw and that what it
// accepts is a prefix of its input.
func FuzzCheckRaw(f *testing.F) {
	f.Add(storedBatches(f, 3), uint64(1))
	f.Add([]byte{48, 0, 0, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, from uint64) {
		if len(data) == 0 {
			return
		}
		got, next, err := checkRaw(data, from)
		if !bytes.HasPrefix(data, got) {
			t.Fatal("returned data is not a prefix of the input")
		}
		if err == nil && (len(got) == 0 || next <= from) {
			t.Fatalf("accepted %d bytes with next %d for a fetch at %d", len(got), next, from)
		}
	})
}
