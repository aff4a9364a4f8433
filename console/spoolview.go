package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
)

// statusViaSpool gathers what the spool server at mm's spool endpoint
// tells of a member that serves no HTTP: the offsets of the streams it
// advertises (the pull protocol's OpMeta), its consumer groups (the
// group protocol's list, as fastmq group ls asks) and its readers (the
// pull protocol's OpReaders). The rest of a Status
// (disk, consumers, RPC) is not had that way and stays empty. It asks
// with n's client socket settings (CURVE keys), so a spool server's ACL
// sees n's principal. It blocks until the answers or ctx's end.
func statusViaSpool(ctx context.Context, n *fastmq.Node, mm *MeshMember) (fastmq.Status, error) {
	st := fastmq.Status{Name: mm.Name, Spool: mm.SpoolEndpoint, Time: time.Now()}
	cfg := n.ClientSocketConfig(socket.Config{})
	streams, err := streamMetas(ctx, mm.SpoolEndpoint, mm.Streams, cfg)
	if err != nil {
		return st, err
	}
	st.Streams = streams
	gs, err := group.List(ctx, mm.SpoolEndpoint, group.AllStreams, cfg)
	var se *group.StatusError
	if err != nil && !errors.As(err, &se) {
		return st, fmt.Errorf("console: groups of %s: %w", mm.Name, err)
	}
	// A refusal (an ACL that does not grant this node the list) leaves
	// the groups out, the streams stay.
	st.Groups = gs
	// Its readers (pull protocol version 4; an older server has none to
	// tell).
	if rs, err := pull.Readers(ctx, mm.SpoolEndpoint, pull.AllStreams, cfg); err == nil {
		st.Readers = rs
	}
	return st, nil
}

// streamMetas asks the spool server at endpoint for the oldest and next
// offsets of each of streams, one request at a time on one connection.
// A stream the server does not serve or refuses is listed with Error set.
func streamMetas(ctx context.Context, endpoint string, streams []string, cfg socket.Config) ([]fastmq.StreamStatus, error) {
	if len(streams) == 0 {
		return nil, nil
	}
	cfg.Identity = nil
	sock, err := socket.New(socket.Dealer, cfg)
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	if err := sock.Connect(endpoint); err != nil {
		return nil, err
	}
	out := make([]fastmq.StreamStatus, 0, len(streams))
	for i, s := range streams {
		id := uint32(i + 1)
		req := pull.Request{Op: pull.OpMeta, ID: id, Stream: s, Epoch: pull.NoEpoch}
		if err := sock.Send(ctx, socket.Msg{Frames: pull.EncodeRequest(&req)}); err != nil {
			return nil, fmt.Errorf("console: meta of %s at %s: %w", s, endpoint, err)
		}
		rep, err := recvReply(ctx, sock, id)
		if err != nil {
			return nil, fmt.Errorf("console: meta of %s at %s: %w", s, endpoint, err)
		}
		ss := fastmq.StreamStatus{Name: s, Oldest: rep.Oldest, Next: rep.Next}
		if rep.Status != pull.StatusOK {
			ss = fastmq.StreamStatus{Name: s, Error: rep.Status.String() + ": " + string(rep.Data)}
		}
		out = append(out, ss)
	}
	return out, nil
}

// recvReply receives replies until the one to request id.
func recvReply(ctx context.Context, sock *socket.Socket, id uint32) (pull.Reply, error) {
	for {
		msg, err := sock.Recv(ctx)
		if err != nil {
			return pull.Reply{}, err
		}
		rep, err := pull.DecodeReply(msg.Frames)
		if err != nil {
			return rep, err
		}
		if rep.ID == id {
			return rep, nil
		}
	}
}
