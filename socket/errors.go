package socket

import (
	"context"
	"errors"
)

// Errors returned by Socket methods. Match them with errors.Is.
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("socket: closed")
	// ErrTimeout is returned when a Send or Recv deadline passes, whether
	// it came from the caller's context or from Config.SendTimeout /
	// RecvTimeout. Such errors also match context.DeadlineExceeded.
	ErrTimeout = errors.New("socket: timeout")
	// ErrUnknownPeer is returned by a ROUTER with RouterMandatory set when
	// the destination identity is not connected.
	ErrUnknownPeer = errors.New("socket: unknown peer")
	// ErrIdentityInUse is the reason a ROUTER refuses a connection whose
	// identity another connection holds (see Config.RouterHandover), or
	// one that claims an identity reserved for generated ones.
	ErrIdentityInUse = errors.New("socket: identity in use or reserved")
	// ErrMsgTooLarge reports a message over Config.MaxMsgSize; the peer
	// that sent it is disconnected.
	ErrMsgTooLarge = errors.New("socket: message too large")
	// ErrState is returned when REQ/REP calls come in the wrong order
	// (REQ: Send, Recv, Send...; REP: Recv, Send, Recv...).
	ErrState = errors.New("socket: operation not valid in current state")
	// ErrNotSupported is returned for operations the kind does not support
	// (Recv on PUSH, Subscribe on PULL, ...).
	ErrNotSupported = errors.New("socket: not supported")
	// ErrBadEndpoint is returned for a malformed or unusable endpoint.
	ErrBadEndpoint = errors.New("socket: bad endpoint")
)

// timeoutError matches both ErrTimeout and context.DeadlineExceeded.
type timeoutError struct{ cause error }

func (e timeoutError) Error() string { return "socket: timeout" }
func (e timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == e.cause
}
func (e timeoutError) Unwrap() error { return e.cause }
func (e timeoutError) Timeout() bool { return true }

func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return timeoutError{cause: context.DeadlineExceeded}
	}
	return err
}
