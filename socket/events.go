package socket

import (
	"fmt"
	"sync"
)

// EventType says what an Event reports.
type EventType int

// Event types.
const (
	EventConnected       EventType = iota // handshake done on a connection we dialed
	EventAccepted                         // handshake done on a connection we accepted
	EventDisconnected                     // an established connection ended (Err says why)
	EventHandshakeFailed                  // a connection failed its handshake (Err says why)
	EventDropped                          // messages dropped for a slow peer (rate limited)
	EventListening                        // Bind succeeded
	EventConnectRetried                   // a dial failed; will retry after backoff
)

// String returns the event name, e.g. "connected".
func (t EventType) String() string {
	switch t {
	case EventConnected:
		return "connected"
	case EventAccepted:
		return "accepted"
	case EventDisconnected:
		return "disconnected"
	case EventHandshakeFailed:
		return "handshake-failed"
	case EventDropped:
		return "dropped"
	case EventListening:
		return "listening"
	case EventConnectRetried:
		return "connect-retried"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a notable thing that happened to a socket.
type Event struct {
	Type     EventType
	Endpoint string // the endpoint bound or connected
	Peer     string // remote address, when known
	Err      error
}

// String renders e for logs.
func (e Event) String() string {
	s := e.Type.String() + " " + e.Endpoint
	if e.Peer != "" {
		s += " peer=" + e.Peer
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

// eventQueue is the socket's bounded event channel: a full channel drops
// new events rather than block whoever reports them.
type eventQueue struct {
	mu     sync.Mutex // guards closed and sends on ch
	closed bool
	ch     chan Event
}

func (q *eventQueue) init() { q.ch = make(chan Event, 256) }

// close closes the channel; later events are discarded.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	close(q.ch)
	q.mu.Unlock()
}

// Events returns the socket's event channel. It is buffered (256 events);
// when it is full new events are dropped and counted in
// Stats.EventsDropped. It is closed when Close returns.
func (s *Socket) Events() <-chan Event { return s.ev.ch }

func (s *Socket) emit(e Event) {
	s.ev.mu.Lock()
	if !s.ev.closed {
		select {
		case s.ev.ch <- e:
		default:
			s.st.eventsDropped.Add(1)
		}
	}
	s.ev.mu.Unlock()
}
