package socket

// Stats are cumulative counters of a socket.
type Stats struct {
	Sent, Received    uint64 // messages handed to / taken from the socket
	Dropped           uint64 // messages dropped by HWM policy or unroutable
	EventsDropped     uint64 // events lost because Events() was not drained
	Peers             int    // currently connected peers (handshake done)
	HandshakeFailures uint64
	Disconnects       uint64 // established connections that ended
	ConnectRetries    uint64
	TooLarge          uint64 // peers disconnected for exceeding MaxMsgSize
}

// QueuedBytes returns the bytes queued for all peers together (as
// SendHWMBytes counts them) when Config.SendHWMBytesTotal is set, and 0
// otherwise. It lets a sender size what it sends to the room left.
func (s *Socket) QueuedBytes() int64 { return s.queuedBytes.Load() }

// Stats returns a snapshot of the socket's counters.
func (s *Socket) Stats() Stats {
	return Stats{
		Sent:              s.st.sent.Load(),
		Received:          s.st.received.Load(),
		Dropped:           s.st.dropped.Load(),
		EventsDropped:     s.st.eventsDropped.Load(),
		Peers:             len(*s.peers.Load()),
		HandshakeFailures: s.st.hsFail.Load(),
		Disconnects:       s.st.disconnects.Load(),
		ConnectRetries:    s.st.retries.Load(),
		TooLarge:          s.st.tooLarge.Load(),
	}
}
