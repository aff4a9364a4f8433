package fastmq_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// wantOwned fails unless err names field as one the node sets.
func wantOwned(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), field+" is set by the node") {
		t.Fatalf("err %v, want one naming %s as set by the node", err, field)
	}
}

// TestGroupRefusesNodeFields: Node.Group refuses a GroupConfig.Member
// that sets a field the node sets itself, naming it, and starts a member
// when those are zero.
func TestGroupRefusesNodeFields(t *testing.T) {
	n := newNode(t, "owned-group")
	for field, mc := range map[string]group.MemberConfig{
		"Stream":      {Stream: "other"},
		"Group":       {Group: "other"},
		"Name":        {Name: "someone"},
		"Incarnation": {Incarnation: "x"},
		"Publishers":  {Publishers: map[string]string{"p": "tcp://127.0.0.1:1"}},
		"Discovery":   {Discovery: n.Membership()},
		"Socket":      {Socket: socket.Config{SendHWM: 10}},
		"Logger":      {Logger: slog.New(slog.DiscardHandler)},
	} {
		_, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "g", Member: mc})
		wantOwned(t, err, "GroupConfig.Member."+field)
	}
	m, err := n.Group(fastmq.GroupConfig{Stream: "s", Group: "g", Member: group.MemberConfig{Buffer: 2, AckWait: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestConsumeRefusesNodeFields: Node.Consume refuses a
// ConsumerConfig.Pull that sets a field the node sets itself, naming it,
// without keeping the consumer's name reserved.
func TestConsumeRefusesNodeFields(t *testing.T) {
	n := newNode(t, "owned-consume")
	store, err := spool.OpenOffsets(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for field, pc := range map[string]pull.ConsumerConfig{
		"Stream":    {Stream: "other"},
		"Name":      {Name: "ignored"},
		"Offsets":   {Offsets: store},
		"Discovery": {Discovery: n.Membership()},
		"Socket":    {Socket: socket.Config{SendHWM: 10}},
		"Logger":    {Logger: slog.New(slog.DiscardHandler)},
		"Node":      {Node: "other"},
	} {
		_, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c", Pull: pc})
		wantOwned(t, err, "ConsumerConfig.Pull."+field)
	}
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "c", Pull: pull.ConsumerConfig{Start: spool.Latest()}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestHandleRefusesNodeFields: Node.Handle refuses a HandleOptions.Server
// that sets a field Handle sets itself, naming it, and serves when those
// are zero.
func TestHandleRefusesNodeFields(t *testing.T) {
	n := newNode(t, "owned-handle")
	echo := func(_ context.Context, req []byte) ([]byte, error) { return req, nil }
	for field, sc := range map[string]rpc.ServerConfig{
		"Service":            {Service: "other"},
		"Handler":            {Handler: echo},
		"Endpoints":          {Endpoints: []string{"tcp://127.0.0.1:0"}},
		"AdvertiseEndpoints": {AdvertiseEndpoints: []string{"tcp://127.0.0.1:1"}},
		"Discovery":          {Discovery: n.Membership()},
		"Node":               {Node: "someone"},
	} {
		_, err := n.Handle("echo", echo, fastmq.HandleOptions{Server: sc})
		wantOwned(t, err, "HandleOptions.Server."+field)
	}
	srv, err := n.Handle("echo", echo, fastmq.HandleOptions{Server: rpc.ServerConfig{Concurrency: 2}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}
