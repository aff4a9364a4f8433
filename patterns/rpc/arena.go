package rpc

import (
	"context"
	"time"
)

// arena hands out the reply buffers and handler contexts of one receiver
// (dispatch.go) from blocks, so that serving a request allocates nothing
// of its own. Nothing handed out is reused: the socket holds a reply until
// it is written, and a handler may keep its context, so a block lives on,
// as an allocation of its own would, until nothing in it is referenced
// (a reply queued for a slow peer thus keeps the block's other replies,
// and what they reference, alive until it is written). An arena belongs
// to one goroutine; a nil *arena allocates each on its own.
type arena struct {
	replies []replyBuf
	ctxs    []callCtx
}

// arenaBlock is how many reply buffers, or contexts, a block holds.
const arenaBlock = 16

func (a *arena) replyBuf() *replyBuf {
	if a == nil {
		return new(replyBuf)
	}
	if len(a.replies) == 0 {
		a.replies = make([]replyBuf, arenaBlock)
	}
	rb := &a.replies[0]
	a.replies = a.replies[1:]
	return rb
}

// callCtx returns a handler context: parent with deadline (see callCtx).
func (a *arena) callCtx(parent context.Context, deadline time.Time) *callCtx {
	if a == nil {
		return newCallCtx(parent, deadline)
	}
	if len(a.ctxs) == 0 {
		a.ctxs = make([]callCtx, arenaBlock)
	}
	c := &a.ctxs[0]
	a.ctxs = a.ctxs[1:]
	c.Context, c.deadline = parent, deadline
	return c
}
