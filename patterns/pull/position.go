package pull

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/spool"
)

// The server's side of the position check (see "Log identity and epochs"
// in the package documentation): a version 2 fetch names the log and the
// epoch its offset is in, and is answered only if that position is one of
// the stream's log as it is now.

// positionCounters count the fetches the position check refused.
type positionCounters struct {
	otherLog, diverged atomic.Uint64
}

// refusePosition answers a version 2 fetch whose position the stream's
// log l cannot continue: StatusOtherLog when it names another log or an
// epoch l never reached, StatusDiverged when its epoch ended below its
// offset (l lost records the consumer read). It reports whether it
// answered; otherwise the fetch is served as usual.
func (s *Server) refusePosition(l *spool.Log, env [][]byte, req Request) bool {
	if req.Version < 2 || req.Op != OpFetch || req.Epoch == NoEpoch {
		return false
	}
	id := l.ID()
	epoch, _ := l.Epoch()
	end, ok := l.EpochEnd(req.Epoch)
	rep := Reply{Version: req.Version, ID: req.ID, Oldest: l.OldestOffset(), High: l.NextOffset(), LogID: id, Epoch: epoch}
	switch {
	case (req.LogID != uuid.Nil && id != uuid.Nil && req.LogID != id) || !ok:
		s.pos.otherLog.Add(1)
		rep.Status, rep.Next = StatusOtherLog, req.Offset
		if ok {
			rep.Data = fmt.Appendf(nil, "position in log %s, but stream %s is log %s", req.LogID, req.Stream, id)
		} else {
			rep.Data = fmt.Appendf(nil, "log %s never reached epoch %d (it is in epoch %d)", id, req.Epoch, epoch)
		}
	case end < req.Offset:
		s.pos.diverged.Add(1)
		rep.Status, rep.Next, rep.Epoch = StatusDiverged, end, req.Epoch
		rep.Data = fmt.Appendf(nil, "epoch %d of the log ended at %d: records %d to %d were lost, and their offsets name other records", req.Epoch, end, end, req.Offset-1)
	default:
		return false
	}
	// Counted, and logged only at Debug: the consumer reports it, and a
	// peer must not be able to flood the publisher's log.
	if s.log.Enabled(s.ctx, slog.LevelDebug) {
		s.log.Debug("fetch position refused", "stream", req.Stream, "offset", req.Offset, "epoch", req.Epoch, "log", req.LogID.String(), "status", rep.Status.String())
	}
	s.reply(env, &rep)
	return true
}

// stamp prepares a version 2 ok fetch reply holding data (whole batches
// from the one holding req.Offset; next is the offset after them): it
// cuts data at the end of the epoch of req.Offset, so every record sent
// belongs to one epoch (epoch boundaries fall on batch boundaries), and
// stamps rep with the log's identity and the epoch of the record before
// rep.Next. A version 1 reply is left as it is.
func stamp(l *spool.Log, req Request, rep *Reply) {
	if req.Version < 2 {
		return
	}
	rep.LogID = l.ID()
	if len(rep.Data) > 0 {
		if end, ok := l.EpochEnd(l.EpochOf(req.Offset)); ok && end < rep.Next {
			rep.Data, rep.Next = cutBatches(rep.Data, req.Offset, end)
		}
	}
	if rep.Next > 0 {
		rep.Epoch = l.EpochOf(rep.Next - 1)
	}
}

// cutBatches returns the batches of data (checked by checkRaw, for a fetch
// at from) whose records lie below end, and the offset after them.
func cutBatches(data []byte, from, end uint64) ([]byte, uint64) {
	pos, next := 0, from
	for pos+rawHeaderLen <= len(data) {
		b := data[pos:]
		base := binary.LittleEndian.Uint64(b[rawBaseAt:])
		count := uint64(binary.LittleEndian.Uint32(b[rawCountAt:]))
		if base+count > end {
			break
		}
		next = base + count
		pos += int(binary.LittleEndian.Uint32(b[rawLenAt:]))
	}
	return data[:pos], next
}
