package group

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/spool"
)

type nopSender struct{}

func (nopSender) Send([][]byte, [][]byte) error { return nil }

// A fetch that may take many records, answered with the few the log
// holds (as at low rates), gets a reply buffer sized for those few, not
// a FrameBytes buffer: every reply's buffer is garbage once sent.
func TestReplySizedForRecordsHeld(t *testing.T) {
	dir := t.TempDir()
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lookup := func(string) (*spool.Log, bool) { return l, true }
	s, err := NewServer(ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup,
		Open: func(string) (*spool.Log, error) { return l, nil }, Send: nopSender{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	val := make([]byte, 100)
	if _, err := l.Append(context.Background(), spool.Record{Value: val}, spool.Record{Value: val}); err != nil {
		t.Fatal(err)
	}
	req := Request{Op: OpFetch, MaxRecords: 512, MaxBytes: 1 << 20, AckWaitMillis: 30000, MaxAckPending: 1000,
		Flags: FlagFrames, Stream: "s", Group: "g", Member: "m"}
	s.mu.Lock()
	g, err := s.groupLocked(req, l)
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	data, n := s.leaseLocked(g, l, req, time.Now())
	s.mu.Unlock()
	if n != 2 || len(data) != 1 {
		t.Fatalf("leased %d records in %d frames, want 2 in 1", n, len(data))
	}
	if c := cap(data[0]); c > 2*len(data[0]) {
		t.Fatalf("a reply of %d bytes has a buffer of %d", len(data[0]), c)
	}
}
