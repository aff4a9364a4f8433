package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context a handler runs with when its request carries a
// deadline: the server's context with that deadline. A handler that never
// waits on Done (most of them) costs no timer: the context.WithDeadline
// behind Done is made the first time Done or Err needs it.
type callCtx struct {
	context.Context // the server's
	deadline        time.Time

	once   sync.Once
	made   atomic.Bool // once has run
	inner  context.Context
	cancel context.CancelFunc
}

func newCallCtx(parent context.Context, deadline time.Time) *callCtx {
	return &callCtx{Context: parent, deadline: deadline}
}

func (c *callCtx) init() {
	c.once.Do(func() {
		c.inner, c.cancel = context.WithDeadline(c.Context, c.deadline)
		c.made.Store(true)
	})
}

// Deadline returns the request's deadline.
func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed when the deadline passes, the server
// closes or the handler has returned.
func (c *callCtx) Done() <-chan struct{} {
	c.init()
	return c.inner.Done()
}

// AfterFunc arranges to call f once the context ends. The context package
// uses it for contexts derived from this one, which then need no
// goroutine of their own to follow it.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.init()
	return context.AfterFunc(c.inner, f)
}

// Err returns nil until Done is closed, then why. Before Done was asked
// for, it checks the clock and the server's context; once either says the
// context ended, it makes Done (closed at once) so that Err and Done
// agree.
func (c *callCtx) Err() error {
	if !c.made.Load() && c.Context.Err() == nil && time.Now().Before(c.deadline) {
		return nil
	}
	c.init()
	return c.inner.Err()
}

// release ends the context once the handler has returned, as the cancel
// of a context.WithDeadline would: a context the handler kept reads
// canceled from then on.
func (c *callCtx) release() {
	c.once.Do(func() {
		c.inner, c.cancel = released, func() {}
		c.made.Store(true)
	})
	c.cancel()
}

// released is the context a released callCtx that never made its own
// reads as: canceled.
var released = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
