package group_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// An operator's view of a publisher's groups: List every group, move one
// group's cursor back with Seek, and see its dead letters and replay
// them into the stream.
func ExampleSeek() {
	dir, _ := os.MkdirTemp("", "group-example")
	defer os.RemoveAll(dir)
	var mu sync.Mutex // the group server opens the dead-letter stream while it looks others up
	logs := map[string]*spool.Log{}
	open := func(stream string) (*spool.Log, error) {
		mu.Lock()
		defer mu.Unlock()
		if l := logs[stream]; l != nil {
			return l, nil
		}
		l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "streams", stream)})
		if err != nil {
			return nil, err
		}
		logs[stream] = l
		return l, nil
	}
	orders, _ := open("orders")
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		orders.Append(context.Background(), spool.Record{Value: fmt.Appendf(nil, "order-%d", i)})
	}
	// A publisher: a spool server with a group server (a fastmq.Node runs
	// both for its streams).
	lookup := func(s string) (*spool.Log, bool) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := logs[s]
		return l, ok
	}
	srv, _ := pull.NewServer(pull.ServerConfig{Lookup: lookup})
	defer srv.Close()
	gs, _ := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup, Open: open, Send: srv})
	group.Register(srv, gs)
	ep := srv.Endpoints()[0]

	// A member acknowledges order-0 and terminates order-1.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, _ := group.NewMember(group.MemberConfig{Stream: "orders", Group: "billing", Publishers: map[string]string{"p": ep}, Buffer: 1})
	msg, _ := m.Next(ctx)
	msg.Ack(ctx)
	msg, _ = m.Next(ctx)
	msg.Term(ctx, "no such customer")
	m.Shutdown(ctx) // leave the group: its leases go back at once

	list, _ := group.List(ctx, ep, group.AllStreams, socket.Config{})
	for _, st := range list {
		fmt.Printf("%s/%s: floor %d, lag %d\n", st.Stream, st.Group, st.Floor, st.Lag)
	}
	dls, _ := group.DeadLetters(ctx, ep, "orders", "billing", 0, 10, socket.Config{})
	for _, r := range dls {
		fmt.Printf("dead letter %d: %s\n", r.Offset, r.Value)
	}
	res, _ := group.Replay(ctx, ep, "orders", "billing", 0, 0, socket.Config{})
	fmt.Printf("replayed %d to billing\n", res.Replayed)
	st, _ := group.Seek(ctx, ep, "orders", "billing", spool.Earliest(), socket.Config{})
	fmt.Printf("after the seek: floor %d, lag %d\n", st.Floor, st.Lag)
	// Output:
	// orders/billing: floor 2, lag 1
	// dead letter 0: order-1
	// replayed 1 to billing
	// after the seek: floor 0, lag 3
}

// An Admin asks every publisher of a stream at once and answers per
// publisher. Its Publishers func finds them: a fixed list here; in a
// mesh, the instances gossip names for the stream (fastmq's group and
// dlq commands wait for gossip, then use an Admin).
func ExampleNewAdmin() {
	adm, err := group.NewAdmin(group.AdminConfig{
		Publishers: func(ctx context.Context, stream string) ([]group.Publisher, error) {
			return []group.Publisher{
				{Name: "web-1", Endpoint: "tcp://10.0.0.1:7401"},
				{Name: "web-2", Endpoint: "tcp://10.0.0.2:7401"},
			}, nil
		},
		Timeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := adm.Info(context.Background(), "orders", "billing")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		if r.Err != nil {
			fmt.Printf("%s: %v\n", r.Publisher.Name, r.Err)
			continue
		}
		fmt.Printf("%s: lag %d, %d dead letters\n", r.Publisher.Name, r.Value.Lag, r.Value.DeadLetters)
	}
}
