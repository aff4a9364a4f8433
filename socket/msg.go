package socket

import "fmt"

// Msg is one (possibly multipart) message. A Msg passed to Send belongs to
// the socket afterwards: do not modify its frames. A Msg returned by Recv
// belongs to the caller; to save allocations, the frames of successive
// received messages may share backing arrays, but each frame is capped at
// its own length and the socket never writes to or reuses them, so the
// caller may modify, append to and keep them freely.
type Msg struct {
	Frames [][]byte
}

// NewMsg returns a message with the given frames (not copied).
func NewMsg(frames ...[]byte) Msg { return Msg{Frames: frames} }

// NewMsgString returns a message whose frames are the given strings.
func NewMsgString(frames ...string) Msg {
	m := Msg{Frames: make([][]byte, len(frames))}
	for i, f := range frames {
		m.Frames[i] = []byte(f)
	}
	return m
}

// String renders the frames for debugging.
func (m Msg) String() string { return fmt.Sprintf("%q", m.Frames) }
