package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastmq/fastmq/socket"
)

// An attempt of a call: the instance it goes to (pick), the request sent
// and its answer awaited (attempt), and what the answer means (result).

// picked is the instance pick chose and whether it was connected then;
// restart says every instance had been tried, so the call's list of tried
// instances starts over.
type picked struct {
	inst      *instance
	connected bool
	restart   bool
}

// pick waits as the call asks for an instance and chooses one that is not
// in tried (the instances this call has used) if it can. It makes the
// attempt p's attempt in progress on it.
func (c *Client) pick(ctx context.Context, tried []*instance, wait bool, p *pendingCall) (picked, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return picked{}, ErrClosed
		}
		var pk picked
		inst, err := c.pickLocked(tried, time.Time{})
		if errors.Is(err, errAllTried) {
			pk.restart = true
			inst, err = c.pickLocked(nil, time.Time{})
		}
		if err == nil {
			pk.inst, pk.connected = inst, inst.connected
			p.inst = inst
			select { // a loss told to an earlier attempt
			case <-p.lost:
			default:
			}
			c.mu.Unlock()
			return pk, nil
		}
		ch, ended := c.changed, c.watchEnded
		c.mu.Unlock()
		if !wait || ended {
			return picked{}, fmt.Errorf("rpc: call %q: %w", c.cfg.Service, ErrNoInstance)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return picked{}, fmt.Errorf("rpc: call %q: waiting for an instance: %w", c.cfg.Service, ctx.Err())
		}
	}
}

// attempt sends the request to inst and waits for its outcome. done says
// the call is over (with b or err); otherwise err is why the attempt
// failed and the call may retry. sent is when it began.
func (c *Client) attempt(ctx context.Context, pk picked, p *pendingCall, hr request, req []byte, retryable bool, attemptTimeout time.Duration, sent time.Time) (b []byte, err error, done bool) {
	inst := pk.inst
	if d, ok := ctx.Deadline(); ok {
		hr.timeout = d.Sub(sent)
		if hr.timeout <= 0 {
			c.end(p, inst, outcomeAbandoned, 0)
			return nil, c.ctxErr(ctx, nil), true
		}
	}
	p.end = time.Time{}
	rm := &p.msg
	if p.sends > 0 {
		rm = new(reqMsg) // the socket may still hold the first
	}
	p.sends++
	rm.frames = [3][]byte{nil, appendRequest(rm.hdr[:0], hr), req}
	msg := socket.Msg{Frames: rm.frames[:]}
	// Queue it within the attempt's time: a DEALER blocks while its
	// instance is not connected. A call that is not retried after a
	// timeout and goes to a connected instance needs no timer of its own.
	actx := ctx
	if retryable || !pk.connected {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
	}
	if err := inst.sock.Send(actx, msg); err != nil {
		c.end(p, inst, outcomeFailed, 0)
		if ctx.Err() != nil {
			return nil, c.ctxErr(ctx, nil), true
		}
		// Not queued: it never left, any call may retry.
		return nil, fmt.Errorf("rpc: send to %s: %w", inst.node, err), false
	}
	var timeout <-chan struct{}
	if retryable {
		timeout = actx.Done()
	}
	select {
	case r := <-p.replies:
		if r.from == inst {
			p.answered = true
			lat := time.Since(sent)
			p.end = sent.Add(lat)
			return c.resultFrom(p, r, inst, lat)
		}
		c.end(p, inst, outcomeAbandoned, 0)
		c.lateReply(r)
		return c.result(r)
	case <-p.lost:
		c.end(p, inst, outcomeFailed, 0)
		if !retryable {
			return nil, fmt.Errorf("rpc: call %q to %s: %w", c.cfg.Service, inst.node, ErrOutcomeUnknown), true
		}
		return nil, fmt.Errorf("rpc: connection to %s lost", inst.node), false
	case <-timeout:
		if ctx.Err() != nil {
			c.end(p, inst, outcomeAbandoned, 0)
			return nil, c.waitErr(ctx, inst), true
		}
		c.end(p, inst, outcomeTimedOut, 0)
		return nil, fmt.Errorf("rpc: attempt on %s timed out after %v", inst.node, attemptTimeout), false
	case <-ctx.Done():
		c.end(p, inst, outcomeAbandoned, 0)
		return nil, c.waitErr(ctx, inst), true
	}
}

// waitErr is ctx's error for a call that ended waiting for inst's reply.
// A deadline that passed counts as one of inst's timeouts in its stats
// (not as a failure that ejects: the deadline is the caller's).
func (c *Client) waitErr(ctx context.Context, inst *instance) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.mu.Lock()
		inst.st.Timeouts++
		c.mu.Unlock()
	}
	return fmt.Errorf("rpc: call %q: %w (no reply from %s)", c.cfg.Service, ctx.Err(), inst.node)
}

// lateReply notes that r answered an attempt of a call after that
// attempt had timed out: if it ran the request (ok or a remote error),
// its instance is alive and serving, only slower than the attempt
// timeout, so the consecutive failures counted against it start over,
// and an ejection they caused ends. A refusal (overloaded, unavailable)
// changes nothing.
func (c *Client) lateReply(r reply) {
	if r.status != StatusOK && r.status != StatusError {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.from.fails = 0
	if r.from.state == ejected {
		r.from.state = healthy
	}
}

// end finishes p's attempt on inst.
func (c *Client) end(p *pendingCall, inst *instance, o outcome, lat time.Duration) {
	c.mu.Lock()
	p.inst = nil
	c.finishLocked(inst, o, lat, p.end) // p.end: when a reply came, else zero
	c.mu.Unlock()
	if o == outcomeFailed || o == outcomeTimedOut {
		c.failures.Add(1)
	}
}

// resultFrom ends p's attempt on inst with its reply r.
func (c *Client) resultFrom(p *pendingCall, r reply, inst *instance, lat time.Duration) ([]byte, error, bool) {
	o := outcomeOK
	switch r.status {
	case StatusUnavailable:
		o = outcomeDraining
	case StatusOverloaded:
		o = outcomeRefused
	}
	c.end(p, inst, o, lat)
	return c.result(r)
}

// result turns a reply into the call's result; done is false when the
// server did not run the handler and the call may retry.
func (c *Client) result(r reply) ([]byte, error, bool) {
	switch r.status {
	case StatusOK:
		if len(r.frames) != 1 {
			return nil, fmt.Errorf("rpc: malformed reply from %s", r.from.node), true
		}
		return r.frames[0], nil, true
	case StatusError:
		e := &Error{Code: "error", Instance: r.from.node}
		if len(r.frames) == 2 {
			e.Code, e.Message = string(r.frames[0]), string(r.frames[1])
		}
		c.mu.Lock()
		r.from.st.Errors++
		c.mu.Unlock()
		return nil, e, true
	case StatusUnavailable:
		return nil, fmt.Errorf("rpc: %s: %w", r.from.node, ErrShuttingDown), false
	case StatusOverloaded:
		return nil, fmt.Errorf("rpc: %s: %w", r.from.node, ErrOverloaded), false
	case StatusBadRequest:
		return nil, fmt.Errorf("rpc: %s refused the request as malformed", r.from.node), true
	}
	return nil, fmt.Errorf("rpc: %s replied with unknown status %d", r.from.node, r.status), true
}
