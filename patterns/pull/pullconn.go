package pull

// The connection of one fetcher: its DEALER socket, request numbering and
// protocol version, and the wait for a reply (reconnections end a wait:
// the request is sent again).

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/socket"
)

var reqIDs atomic.Uint32

// pullConn is one fetcher's DEALER socket and request numbering.
type pullConn struct {
	c       *Consumer
	ps      *pubState
	sock    *socket.Socket
	lg      *slog.Logger
	version uint8 // protocol version of the requests

	waitMu     sync.Mutex
	conns      uint64             // connections re-established (see watchEvents)
	sentOn     uint64             // conns when the last request was sent
	cancelWait context.CancelFunc // ends the wait for a reply; nil when none
}

// errFellBack reports that the publisher answered with an older protocol
// version, which the connection now speaks: send the request again.
var errFellBack = errors.New("pull: publisher speaks an older protocol version")

func (pc *pullConn) sendFetch(ctx context.Context, pos uint64) uint32 {
	return pc.send(ctx, OpFetch, pos)
}

// send sends a request and returns its id. A failed send is left to the
// reply timeout, which sends again. A fetch carries the log identity and
// epoch of the publisher's position.
func (pc *pullConn) send(ctx context.Context, op Op, arg uint64) uint32 {
	cfg := &pc.c.cfg
	r := Request{Version: pc.version, Op: op, ID: reqIDs.Add(1), Offset: arg, MaxBytes: uint32(cfg.MaxBytes), Stream: cfg.Stream, Epoch: NoEpoch,
		Consumer: cfg.Name, Node: cfg.Node}
	if op == OpFetch {
		r.MaxWaitMillis = uint32(cfg.MaxWait / time.Millisecond)
		pc.c.mu.Lock()
		r.LogID, r.Epoch = pc.ps.logID, pc.ps.logEpoch
		pc.c.mu.Unlock()
	}
	pc.sent()
	sctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	err := pc.sock.Send(sctx, socket.Msg{Frames: EncodeRequest(&r)})
	cancel()
	if err != nil && ctx.Err() == nil && pc.lg.Enabled(ctx, slog.LevelDebug) {
		pc.lg.Debug("send fetch", "err", err)
	}
	return r.ID
}

// await waits for the reply to request id, discarding stale replies.
func (pc *pullConn) await(ctx context.Context, id uint32) (Reply, error) {
	rctx, reconnected, stop := pc.waitContext(ctx)
	defer stop()
	for {
		m, err := pc.sock.Recv(rctx)
		if err != nil {
			if ctx.Err() == nil && reconnected() {
				return Reply{}, errReconnected
			}
			return Reply{}, err
		}
		rep, err := DecodeReply(m.Frames)
		if err != nil {
			pc.lg.Warn("malformed reply", "err", err)
			continue
		}
		if rep.Status == StatusBadRequest && rep.Version < pc.version {
			// A publisher that does not speak our version answers in
			// its own, without our request's id.
			// It answers in the oldest version, which need not be its
			// newest: step down one version at a time.
			pc.version = max(rep.Version, pc.version-1)
			pc.lg.Warn("publisher speaks an older pull protocol, falling back", "version", pc.version, "err", message(rep.Data))
			return Reply{}, errFellBack
		}
		if rep.ID == id {
			return rep, nil
		}
	}
}

// maxBadReplies is how many bad replies in a row (undecodable, not matching
// their header, refused as bad requests) stop a publisher's fetcher:
// damage on the publisher's disk is reported, never skipped.
const maxBadReplies = 5

// errBadReply reports a reply whose records do not match what it claims.
var errBadReply = errors.New("pull: reply does not match its header")
