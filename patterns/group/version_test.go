package group_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// A request of the group protocol's older version (0x81) gets status
// unsupported in that version's reply header, and the publisher goes on
// answering requests of its own version; so does a request of a version
// no one registered on the Server, handed to it directly.
func TestOldVersionRefused(t *testing.T) {
	p := newPublisher(t, t.TempDir())
	p.publish(t, "s", 3)
	sock, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	if err := sock.Connect(p.srv.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []byte{wire.FirstVersion, wire.Version - 1} {
		old := wire.EncodeRequest(&wire.Request{Op: wire.OpFetch, ID: 77, MaxRecords: 10, MaxBytes: 1 << 20,
			Stream: "s", Group: "g", Member: "old/1", Flags: wire.FlagFrames})
		old[0][0] = v
		if err := sock.Send(ctx, socket.Msg{Frames: old}); err != nil {
			t.Fatal(err)
		}
		m, err := sock.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Frames[0]
		if len(m.Frames) != 2 || len(h) != 10 || h[0] != v || group.Status(h[1]) != group.StatusUnsupported || binary.BigEndian.Uint32(h[2:]) != 77 {
			t.Fatalf("version %#x: answer %x", v, m.Frames)
		}
		if !strings.Contains(string(m.Frames[1]), "unsupported") {
			t.Fatalf("version %#x: message %q", v, m.Frames[1])
		}
	}
	rep := rawCaller(t, p)(&wire.Request{Op: wire.OpFetch, ID: 1, MaxRecords: 10, MaxBytes: 1 << 20, Stream: "s", Group: "g", Member: "new/1"})
	if rep.Status != wire.StatusOK || len(rep.Records) != 3 {
		t.Fatalf("after the refusals: status %d, %d records", rep.Status, len(rep.Records))
	}

	// Straight to the Server: a version byte it does not speak.
	var got [][]byte
	gs, err := group.NewServer(group.ServerConfig{Dir: t.TempDir(), Lookup: func(string) (*spool.Log, bool) { return nil, false }, Open: p.open, Send: senderFunc(func(_, frames [][]byte) error {
		got = frames
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	future := wire.EncodeRequest(&wire.Request{Op: wire.OpInfo, ID: 5, Stream: "s", Group: "g", Member: "m"})
	future[0][0] = 0x90
	gs.Handle(nil, future)
	if len(got) != 2 || got[0][0] != 0x90 || group.Status(got[0][1]) != group.StatusUnsupported || binary.BigEndian.Uint32(got[0][2:]) != 5 {
		t.Fatalf("version 0x90: answer %x", got)
	}
}

type senderFunc func(env, frames [][]byte) error

func (f senderFunc) Send(env, frames [][]byte) error { return f(env, frames) }
