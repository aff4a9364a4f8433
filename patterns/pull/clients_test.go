package pull_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// TestServerClients: the server lists who fetched what. A consumer that
// tells its name and node (version 4) is listed by them with the
// position of its last fetch; a version 3 client, sending raw frames as
// an older consumer does, is listed by its address, and is still served.
func TestServerClients(t *testing.T) {
	l := openSpool(t, spool.Config{})
	appendN(t, l, "r", 0, 10)
	s := startServer(t, map[string]*spool.Log{"logs": l})
	c := startConsumer(t, pull.ConsumerConfig{Stream: "logs", Name: "billing", Node: "worker-1",
		Publishers: map[string]string{"p": s.Endpoints()[0]}})
	for i := 0; i < 10; i++ {
		c.Ack(next(t, c))
	}
	var got pull.ClientStats
	testutil.WaitFor(t, "the consumer listed at the stream's end", 0, func() bool {
		for _, cs := range s.Clients() {
			if cs.Consumer == "billing" {
				got = cs
				return cs.Position == 10
			}
		}
		return false
	})
	if got.Stream != "logs" || got.Node != "worker-1" || got.High != 10 || got.Peer == "" || got.Fetches == 0 ||
		time.Since(got.LastFetch) > time.Minute {
		t.Errorf("listed as %+v", got)
	}

	// A version 3 request: two frames, no names.
	d, err := socket.New(socket.Dealer, socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Connect(s.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := pull.Request{Version: 3, Op: pull.OpFetch, ID: 7, Offset: 4, MaxBytes: 1 << 20, Stream: "logs", Epoch: pull.NoEpoch}
	frames := pull.EncodeRequest(&req)
	if len(frames) != 2 {
		t.Fatalf("a version 3 request has %d frames, want 2", len(frames))
	}
	if err := d.Send(ctx, socket.Msg{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	m, err := d.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := pull.DecodeReply(m.Frames)
	if err != nil || rep.Status != pull.StatusOK || rep.Version != 3 || rep.Next != 10 {
		t.Fatalf("version 3 fetch: %+v, %v", rep, err)
	}
	anon := 0
	for _, cs := range s.Clients() {
		if cs.Consumer == "" && cs.Node == "" && cs.Position == 4 && cs.Peer != "" {
			anon++
		}
	}
	if anon != 1 {
		t.Errorf("the version 3 client listed %d times: %+v", anon, s.Clients())
	}

	// Over the wire (OpReaders): the same list, and under an ACL only the
	// readers of streams the asking client may read.
	rs, err := pull.Readers(ctx, s.Endpoints()[0], pull.AllStreams, socket.Config{})
	if err != nil || len(rs) != 2 {
		t.Fatalf("readers over the wire: %+v, %v", rs, err)
	}
	acl, err := pull.ParseACL([]byte("fastmq-acl 1\nallow * other\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetACL(acl); err != nil {
		t.Fatal(err)
	}
	if rs, err := pull.Readers(ctx, s.Endpoints()[0], pull.AllStreams, socket.Config{}); err != nil || len(rs) != 0 {
		t.Fatalf("readers of streams the client may not read: %+v, %v", rs, err)
	}
}

// TestRequestNamesRoundTrip: a version 4 request carries the consumer's
// and node's names; older versions carry none and decode as before.
func TestRequestNamesRoundTrip(t *testing.T) {
	for _, v := range []uint8{1, 2, 3, 4} {
		r := pull.Request{Version: v, Op: pull.OpFetch, ID: 1, Stream: "s", Consumer: "c", Node: "n", Epoch: pull.NoEpoch}
		got, err := pull.DecodeRequest(pull.EncodeRequest(&r))
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		want := v >= 4
		if (got.Consumer == "c" && got.Node == "n") != want || (!want && (got.Consumer != "" || got.Node != "")) {
			t.Errorf("version %d decoded names %q %q", v, got.Consumer, got.Node)
		}
	}
	// A version 4 request without its name frames is malformed.
	r := pull.Request{Version: 4, Op: pull.OpFetch, ID: 1, Stream: "s", Epoch: pull.NoEpoch}
	if _, err := pull.DecodeRequest(pull.EncodeRequest(&r)[:2]); err == nil {
		t.Error("a version 4 request of two frames decoded")
	}
}
