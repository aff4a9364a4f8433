package pull

import "fmt"

// Extension answers the requests of another protocol on a Server's
// ROUTER socket (package group's does, for consumer groups): the server
// hands it every request whose first frame starts with the version byte
// it was registered for (see Server.HandleVersion).
type Extension interface {
	// Handle gets a request: env is the ROUTER envelope to reply to
	// (with Server.Send), frames the request's frames. It is called on
	// the server's receive goroutine and must not block; the frames are
	// the callee's.
	Handle(env [][]byte, frames [][]byte)
	// Close is called once by Server.Close after the server stopped
	// receiving; the extension stops its goroutines before it returns.
	Close() error
}

// HandleVersion hands the requests of protocol version v to ext from now
// on. Versions 1 to ProtocolVersion (the pull protocol's) cannot be taken, nor a
// version already taken. The server closes ext when it closes.
func (s *Server) HandleVersion(v uint8, ext Extension) error {
	if v >= minProtocolVersion && v <= ProtocolVersion {
		return fmt.Errorf("pull: version %d is the pull protocol's", v)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	s.extMu.Lock()
	defer s.extMu.Unlock()
	if _, ok := s.ext[v]; ok {
		return fmt.Errorf("pull: version %d is taken", v)
	}
	if s.ext == nil {
		s.ext = make(map[uint8]Extension)
	}
	s.ext[v] = ext
	return nil
}

// Send sends frames to the peer of the ROUTER envelope env, as the
// server's replies are sent: it waits a short while at most for room in
// the peer's queue, then drops the message. It is for Extensions.
func (s *Server) Send(env [][]byte, frames [][]byte) error {
	return s.send(env, frames)
}

// extension returns the Extension for the request frames, or nil.
func (s *Server) extension(frames [][]byte) Extension {
	if len(frames) == 0 || len(frames[0]) == 0 {
		return nil
	}
	s.extMu.Lock()
	defer s.extMu.Unlock()
	return s.ext[frames[0][0]]
}
