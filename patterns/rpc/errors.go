package rpc

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by Call wrap them, with the service
// name and what was tried; test with errors.Is.
var (
	// ErrClosed is returned by calls on a closed Server or Client.
	ErrClosed = errors.New("rpc: closed")
	// ErrNoInstance means no instance of the service is known (and the
	// call did not ask to wait for one).
	ErrNoInstance = errors.New("rpc: no instance of the service")
	// ErrOutcomeUnknown means a request without an idempotency key was
	// sent to an instance that then failed or lost its connection before
	// replying: the handler may or may not have run, and the call was not
	// retried because running it twice would not be safe.
	ErrOutcomeUnknown = errors.New("rpc: outcome unknown: the instance failed before replying")
	// ErrRetriesExhausted means every attempt the call was allowed failed.
	ErrRetriesExhausted = errors.New("rpc: retries exhausted")
	// ErrShuttingDown is the cause in a call's error when the instances
	// answered that they are shutting down.
	ErrShuttingDown = errors.New("rpc: instance shutting down")
	// ErrOverloaded is the cause in a call's error when the instances
	// answered that their queues were full.
	ErrOverloaded = errors.New("rpc: instance overloaded")
	// ErrRemote matches every *Error (errors.Is(err, ErrRemote)).
	ErrRemote = errors.New("rpc: remote error")
)

// Error is an error a handler returned, as the caller receives it. A
// handler may return an *Error itself to choose the Code; any other error
// reaches the caller with Code "error" and the error's text as Message.
type Error struct {
	Code     string // short machine-readable class, e.g. "not-found"; at most 255 bytes
	Message  string // human-readable text
	Instance string // node that ran the handler (set by the client)
}

// Errorf returns an *Error with code and a formatted message, for handlers.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error renders the error as "rpc: remote error from NODE: CODE: MESSAGE".
func (e *Error) Error() string {
	from := ""
	if e.Instance != "" {
		from = " from " + e.Instance
	}
	return "rpc: remote error" + from + ": " + e.Code + ": " + e.Message
}

// Is makes every *Error match ErrRemote.
func (e *Error) Is(target error) bool { return target == ErrRemote }
