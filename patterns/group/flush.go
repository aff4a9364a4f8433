package group

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// flushLoop is the group commit: it appends dead letters, writes the
// state of every changed group, then sends the replies that waited for
// it. Acknowledgements are answered only once they are on disk. A lazy
// settle (the protocol's lazy flag) waits up to LazyCommit from when the flusher takes
// its wake-up (so one that comes during a commit waits for that commit,
// then LazyCommit), less if a settle that is not lazy comes.
func (s *Server) flushLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wakeFlush:
		case <-s.wakeLazy:
			timer.Reset(s.cfg.LazyCommit)
			select {
			case <-s.ctx.Done():
				return
			case <-s.wakeFlush:
				timer.Stop()
			case <-timer.C:
			}
		}
		if err := s.flush(); err != nil {
			s.log.Error("write group state", "err", err)
		}
	}
}

// isFetchReply tells a fetch reply (records, sent from the flusher when a
// parked fetch is served) from an acknowledgement's: only the latter's
// data is empty with status ok.
func isFetchReply(frames [][]byte) bool { return len(frames[1]) > 0 }

func idOf(h []byte) uint32 {
	if len(h) < 6 {
		return 0
	}
	return uint32(h[2])<<24 | uint32(h[3])<<16 | uint32(h[4])<<8 | uint32(h[5])
}

func (s *Server) deadLetter(d deadLetter) error {
	l, ok := s.cfg.Lookup(d.stream)
	if !ok {
		return errors.New("stream gone")
	}
	r, err := readOne(l, d.offset)
	if err != nil {
		return err
	}
	dl, err := s.cfg.Open(DLQStream(d.stream, d.group))
	if err != nil {
		return err
	}
	// Not the producer's sequence: the dead-letter stream never saw the
	// producer, and would refuse the record as out of sequence.
	hs := append(withoutHeaders(r.Headers, spool.HeaderProducer),
		spool.Header{Key: HeaderDLQStream, Value: []byte(d.stream)},
		spool.Header{Key: HeaderDLQOffset, Value: []byte(strconv.FormatUint(d.offset, 10))},
		spool.Header{Key: HeaderDLQGroup, Value: []byte(d.group)},
		spool.Header{Key: HeaderDLQDeliveries, Value: []byte(strconv.FormatUint(uint64(d.deliveries), 10))},
		spool.Header{Key: HeaderDLQReason, Value: []byte(d.reason)})
	// The handler's last reason (a nak's or term's text) and the
	// delivery history: why, not only that.
	for i := len(d.history) - 1; i >= 0; i-- {
		if r := d.history[i].Reason; r != "" {
			hs = append(hs, spool.Header{Key: HeaderDLQLastReason, Value: []byte(r)})
			break
		}
	}
	if len(d.history) > 0 {
		b, _ := json.Marshal(d.history)
		hs = append(hs, spool.Header{Key: HeaderDLQHistory, Value: b})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = dl.Append(ctx, spool.Record{Value: r.Value, Headers: hs})
	if errors.Is(err, spool.ErrDuplicate) {
		return nil // dead-lettered before (its message id): it is there once
	}
	return err
}
