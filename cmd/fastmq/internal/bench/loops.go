package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// receiveStream receives count stamped messages and times first to last.
// With idle > 0 it stops early when nothing arrives for idle (pubsub drops).
// Messages with a zero stamp (warm-up) are skipped.
//
// The loop keeps the harness out of the measurement, as libzmq's local_thr
// does: one receive deadline is shared by a run of messages (renewed every
// 1024 messages, or when it ends while messages still flow), and the clock
// is read for one message in 64 (the latency sample) and at the ends.
func receiveStream(ctx context.Context, s *socket.Socket, pattern string, o *SocketOptions, idle time.Duration) (benchResult, error) {
	res := benchResult{Pattern: pattern, Transport: o.Transport, Size: o.Size}
	lat := make([]time.Duration, 0, o.Count/64+1)
	var first, lastSeen time.Time
	wait := benchRecvTimeout
	dl := newDeadline(ctx, wait)
	defer func() { dl.cancel() }()
	sinceRenew := 0
	idled := false
	for res.Received < o.Count {
		if sinceRenew >= 1024 {
			dl.cancel()
			dl = newDeadline(ctx, wait)
			sinceRenew = 0
		}
		m, err := s.Recv(dl.ctx)
		if err != nil {
			if ctx.Err() == nil && dl.ctx.Err() != nil {
				now := time.Now()
				if res.Received > 0 && now.Sub(lastSeen) < wait {
					// The shared deadline ended while messages still flow.
					dl.cancel()
					dl = newDeadline(ctx, wait)
					sinceRenew = 0
					continue
				}
				if idle > 0 && res.Received > 0 {
					idled = true
					break
				}
				err = fmt.Errorf("no message for %v: %w", wait, dl.ctx.Err())
			}
			return res, fmt.Errorf("%s receive after %d messages: %w", pattern, res.Received, err)
		}
		sinceRenew++
		if len(m.Frames) != 1 {
			return res, fmt.Errorf("%s: got %d frames, want 1", pattern, len(m.Frames))
		}
		var ts uint64
		if len(m.Frames[0]) >= 8 {
			ts = binary.LittleEndian.Uint64(m.Frames[0])
		}
		if o.Size >= 8 && ts == 0 {
			continue // warm-up
		}
		// The clock is read for stamped messages (and now and then for
		// unstamped ones: sizes under 8 bytes carry no stamp).
		sample := res.Received == 0 || ts > unstamped || res.Received%stampEvery == 0
		var now time.Time
		if sample {
			now = time.Now()
			lastSeen = now
		}
		age, ok := stampAge(m.Frames[0], now)
		if res.Received == 0 {
			first = now
			if idle > 0 {
				wait = idle
			}
		}
		res.Received++
		if ok {
			lat = append(lat, age)
		}
	}
	last := time.Now()
	if idled {
		last = lastSeen // not the idle wait that ended the run
	}
	// Like libzmq's local_thr: the clock runs from the first message to the
	// last, so count-1 messages are timed.
	res.Elapsed = last.Sub(first)
	res.Timed = res.Received - 1
	slices.Sort(lat)
	res.Lat = lat
	return res, nil
}

func sendStream(ctx context.Context, s *socket.Socket, o *SocketOptions) error {
	for i := 0; i < o.Count; i++ {
		if err := s.Send(ctx, socket.NewMsg(stamp(o.Size, i))); err != nil {
			return fmt.Errorf("send message %d: %w", i, err)
		}
	}
	return nil
}

// sendWarmup publishes unstamped messages until stop is closed or d passes.
func sendWarmup(ctx context.Context, s *socket.Socket, size int, stop <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	p := make([]byte, max(size, 8))[:size]
	for time.Now().Before(deadline) {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := s.Send(ctx, socket.NewMsg(bytes.Clone(p))); err != nil {
			return fmt.Errorf("send warm-up: %w", err)
		}
		if stop == nil {
			continue
		}
		// Pace the warm-up so the queue does not fill with it.
		t := time.NewTimer(time.Millisecond)
		select {
		case <-stop:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	if stop != nil {
		return errors.New("subscriber did not receive any warm-up message")
	}
	return nil
}

func roundTrips(ctx context.Context, s *socket.Socket, o *SocketOptions) (benchResult, error) {
	res := benchResult{Pattern: "reqrep", Transport: o.Transport, Size: o.Size}
	lat := make([]time.Duration, 0, o.Count)
	p := make([]byte, o.Size)
	start := time.Now()
	for i := 0; i < o.Count; i++ {
		t := time.Now()
		if err := s.Send(ctx, socket.NewMsg(bytes.Clone(p))); err != nil {
			return res, fmt.Errorf("request %d: %w", i, err)
		}
		if _, err := recvWithin(ctx, s, benchRecvTimeout); err != nil {
			return res, fmt.Errorf("reply %d: %w", i, err)
		}
		lat = append(lat, time.Since(t))
	}
	res.Elapsed = time.Since(start)
	res.Received = o.Count
	res.Timed = o.Count
	slices.Sort(lat)
	res.Lat = lat
	return res, nil
}

func echoReplies(ctx context.Context, s *socket.Socket, count int) error {
	for i := 0; i < count; i++ {
		m, err := recvWithin(ctx, s, benchRecvTimeout)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if err := s.Send(ctx, m); err != nil {
			return fmt.Errorf("reply %d: %w", i, err)
		}
	}
	return nil
}
