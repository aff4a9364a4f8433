package pull

import (
	"context"
	"errors"

	"github.com/fastmq/fastmq/socket"
)

// errReconnected reports that the connection to the publisher was
// re-established while a request was in flight: the request died with the
// old connection, so it is sent again at once instead of after MaxWait +
// RequestTimeout. A late reply to it is ignored by its request id.
var errReconnected = errors.New("pull: reconnected to the publisher, request sent again")

// watchEvents follows the fetcher socket's events until the socket is
// closed (its event channel closes), then closes done. A connection
// established after one was lost counts as a reconnect and cuts the wait
// of the request in flight short.
func (pc *pullConn) watchEvents(events <-chan socket.Event, done chan<- struct{}) {
	defer close(done)
	lost := false
	for ev := range events {
		switch ev.Type {
		case socket.EventConnectRetried, socket.EventHandshakeFailed:
			if ev.Err != nil {
				pc.c.mu.Lock()
				pc.ps.connErr = ev.Err.Error()
				pc.c.mu.Unlock()
			}
		case socket.EventDisconnected:
			lost = true
		case socket.EventConnected:
			pc.c.mu.Lock()
			pc.ps.connErr = ""
			pc.c.mu.Unlock()
			if !lost {
				continue // the first connection: nothing was in flight on another
			}
			lost = false
			pc.c.mu.Lock()
			pc.ps.reconnects++
			pc.c.mu.Unlock()
			pc.waitMu.Lock()
			pc.conns++
			if pc.cancelWait != nil {
				pc.cancelWait()
			}
			pc.waitMu.Unlock()
		}
	}
}

// sent records the connection generation a request was sent on.
func (pc *pullConn) sent() {
	pc.waitMu.Lock()
	pc.sentOn = pc.conns
	pc.waitMu.Unlock()
}

// waitContext returns the context a reply is awaited with: ctx limited
// to MaxWait + RequestTimeout, and ended as well when the connection is
// re-established (reconnected then reports it). stop releases it.
func (pc *pullConn) waitContext(ctx context.Context) (wctx context.Context, reconnected func() bool, stop func()) {
	cfg := &pc.c.cfg
	wctx, cancel := context.WithTimeout(ctx, cfg.MaxWait+cfg.RequestTimeout)
	pc.waitMu.Lock()
	sentOn := pc.sentOn
	if pc.conns != sentOn {
		cancel() // reconnected since the request was sent
	} else {
		pc.cancelWait = cancel
	}
	pc.waitMu.Unlock()
	reconnected = func() bool {
		pc.waitMu.Lock()
		defer pc.waitMu.Unlock()
		return pc.conns != sentOn
	}
	stop = func() {
		pc.waitMu.Lock()
		pc.cancelWait = nil
		pc.waitMu.Unlock()
		cancel()
	}
	return wctx, reconnected, stop
}
