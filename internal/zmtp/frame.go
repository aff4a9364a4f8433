package zmtp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Frame flag bits (RFC 23).
const (
	FlagMore    = 0x01
	FlagLong    = 0x02
	FlagCommand = 0x04
	flagsMask   = FlagMore | FlagLong | FlagCommand
)

// chunk is the largest allocation made for a frame body before the bytes
// have actually arrived; bigger bodies grow as data is read.
const chunk = 1 << 20

// Small frame bodies (up to arenaMax bytes) are carved out of shared
// arenaSize blocks: one allocation per block instead of one per frame.
const (
	arenaSize = 64 << 10
	arenaMax  = 4 << 10
)

// Command is one decoded command frame.
type Command struct {
	Name string
	Body []byte
}

// Reader decodes ZMTP traffic from a buffered stream. It is not safe for
// concurrent use.
type Reader struct {
	br *bufio.Reader
	// MaxMsgSize bounds the total body size of one message; <= 0 means
	// unlimited (memory is then allocated only as bytes arrive).
	MaxMsgSize int64
	// MaxCmdSize bounds one command frame; <= 0 means 64 KiB.
	MaxCmdSize int64
	// MaxFrames bounds the number of frames in one message; <= 0 means
	// unlimited. Without it, a stream of empty frames costs memory that
	// MaxMsgSize does not see.
	MaxFrames int
	hdr       [8]byte
	arena     []byte // unused rest of the current block for small bodies
}

// NewReader returns a Reader with a read buffer of size bytes (0 = 64 KiB).
func NewReader(r io.Reader, size int) *Reader {
	if size <= 0 {
		size = 64 << 10
	}
	return &Reader{br: bufio.NewReaderSize(r, size)}
}

// ReadGreeting reads and decodes the peer's greeting.
func (r *Reader) ReadGreeting() (Greeting, error) {
	var b [GreetingSize]byte
	if _, err := io.ReadFull(r.br, b[:]); err != nil {
		return Greeting{}, fmt.Errorf("zmtp: read greeting: %w", err)
	}
	return ParseGreeting(b[:])
}

// Buffered returns the number of bytes already buffered.
func (r *Reader) Buffered() int { return r.br.Buffered() }

func (r *Reader) header() (flags byte, size uint64, err error) {
	flags, err = r.br.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	if flags&^flagsMask != 0 {
		return 0, 0, fmt.Errorf("%w: reserved flag bits %#x", ErrFrame, flags)
	}
	if flags&FlagLong != 0 {
		if _, err = io.ReadFull(r.br, r.hdr[:8]); err != nil {
			return 0, 0, unexpected(err)
		}
		size = binary.BigEndian.Uint64(r.hdr[:8])
	} else {
		b, err := r.br.ReadByte()
		if err != nil {
			return 0, 0, unexpected(err)
		}
		size = uint64(b)
	}
	return flags, size, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// body reads n bytes. Small bodies are allocated at once; large ones grow as
// data arrives so a lying length cannot make us allocate memory up front.
func (r *Reader) body(n uint64) ([]byte, error) {
	if n <= chunk {
		b := r.alloc(int(n))
		if _, err := io.ReadFull(r.br, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	if n > math.MaxInt-chunk {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrTooLarge, n)
	}
	b := make([]byte, 0, chunk)
	for uint64(len(b)) < n {
		want := n - uint64(len(b))
		if want > chunk {
			want = chunk
		}
		l := len(b)
		b = append(b, make([]byte, want)...)
		if _, err := io.ReadFull(r.br, b[l:]); err != nil {
			return nil, unexpected(err)
		}
	}
	return b, nil
}

// alloc returns a zeroed slice of n bytes (n <= chunk). Small slices share
// a larger block with their neighbours; each is capped at its own length,
// and no part of a block is ever handed out twice.
func (r *Reader) alloc(n int) []byte {
	switch {
	case n == 0:
		return []byte{}
	case n > arenaMax:
		return make([]byte, n)
	case n > len(r.arena):
		r.arena = make([]byte, arenaSize)
	}
	b := r.arena[:n:n]
	r.arena = r.arena[n:]
	return b
}

// Complete reports whether a whole message or command is already buffered,
// so that the next call to Next returns without reading from the
// underlying stream. It returns true as well when the buffered bytes are
// already known to be malformed.
func (r *Reader) Complete() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	for {
		if len(b) < 2 {
			return false
		}
		flags := b[0]
		var size uint64
		h := 2
		if flags&FlagLong != 0 {
			if len(b) < 9 {
				return false
			}
			size, h = binary.BigEndian.Uint64(b[1:9]), 9
		} else {
			size = uint64(b[1])
		}
		if uint64(len(b)-h) < size {
			return false
		}
		b = b[h+int(size):]
		if flags&FlagMore == 0 || flags&FlagCommand != 0 || flags&^flagsMask != 0 {
			return true
		}
	}
}

// Next reads the next unit of traffic: either one command (cmd.Name != "")
// or one complete message whose frames are appended to frames[:0] and
// returned. The frame bodies are owned by the caller and never reused by
// the Reader; small bodies of successive frames may share one backing
// array (each slice is capped at its own length, so appending to one
// cannot overwrite another).
func (r *Reader) Next(frames [][]byte) ([][]byte, Command, error) {
	frames = frames[:0]
	var total uint64
	for {
		flags, size, err := r.header()
		if err != nil {
			if len(frames) > 0 {
				err = unexpected(err)
			}
			return nil, Command{}, err
		}
		if flags&FlagCommand != 0 {
			if len(frames) > 0 {
				return nil, Command{}, fmt.Errorf("%w: command inside a multipart message", ErrFrame)
			}
			if flags&FlagMore != 0 {
				return nil, Command{}, fmt.Errorf("%w: command with MORE flag", ErrFrame)
			}
			limit := uint64(64 << 10)
			if r.MaxCmdSize > 0 {
				limit = uint64(r.MaxCmdSize)
			}
			if size > limit {
				return nil, Command{}, fmt.Errorf("%w: command of %d bytes (limit %d)", ErrTooLarge, size, limit)
			}
			b, err := r.body(size)
			if err != nil {
				return nil, Command{}, err
			}
			cmd, err := ParseCommand(b)
			return nil, cmd, err
		}
		if r.MaxFrames > 0 && len(frames) >= r.MaxFrames {
			return nil, Command{}, fmt.Errorf("%w: more than %d frames", ErrTooLarge, r.MaxFrames)
		}
		total += size
		if total < size || (r.MaxMsgSize > 0 && total > uint64(r.MaxMsgSize)) {
			return nil, Command{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.MaxMsgSize)
		}
		b, err := r.body(size)
		if err != nil {
			return nil, Command{}, err
		}
		frames = append(frames, b)
		if flags&FlagMore == 0 {
			return frames, Command{}, nil
		}
	}
}

// Writer encodes ZMTP traffic into a buffered stream. It is not safe for
// concurrent use. Nothing reaches the underlying writer until the buffer
// fills or Flush is called.
type Writer struct {
	bw  *bufio.Writer
	hdr [9]byte
}

// NewWriter returns a Writer with a buffer of size bytes (0 = 64 KiB).
func NewWriter(w io.Writer, size int) *Writer {
	if size <= 0 {
		size = 64 << 10
	}
	return &Writer{bw: bufio.NewWriterSize(w, size)}
}

// WriteGreeting writes g.
func (w *Writer) WriteGreeting(g Greeting) error {
	b := g.Marshal()
	_, err := w.bw.Write(b[:])
	return err
}

// WriteFrame writes one frame with the given flags (FlagLong is set as
// needed).
func (w *Writer) WriteFrame(flags byte, body []byte) error {
	flags &^= FlagLong
	n := len(body)
	var h []byte
	if n > 255 {
		w.hdr[0] = flags | FlagLong
		binary.BigEndian.PutUint64(w.hdr[1:9], uint64(n))
		h = w.hdr[:9]
	} else {
		w.hdr[0] = flags
		w.hdr[1] = byte(n)
		h = w.hdr[:2]
	}
	if _, err := w.bw.Write(h); err != nil {
		return err
	}
	_, err := w.bw.Write(body)
	return err
}

// WriteMessage writes a message of one or more frames.
func (w *Writer) WriteMessage(frames [][]byte) error {
	if len(frames) == 0 {
		return fmt.Errorf("%w: message with no frames", ErrFrame)
	}
	last := len(frames) - 1
	for i, f := range frames {
		var fl byte
		if i < last {
			fl = FlagMore
		}
		if err := w.WriteFrame(fl, f); err != nil {
			return err
		}
	}
	return nil
}

// WriteCommand writes one command frame.
func (w *Writer) WriteCommand(name string, body []byte) error {
	if len(name) == 0 || len(name) > 255 {
		return fmt.Errorf("%w: name length %d", ErrCommand, len(name))
	}
	n := 1 + len(name) + len(body)
	var h []byte
	if n > 255 {
		w.hdr[0] = FlagCommand | FlagLong
		binary.BigEndian.PutUint64(w.hdr[1:9], uint64(n))
		h = w.hdr[:9]
	} else {
		w.hdr[0] = FlagCommand
		w.hdr[1] = byte(n)
		h = w.hdr[:2]
	}
	if _, err := w.bw.Write(h); err != nil {
		return err
	}
	if err := w.bw.WriteByte(byte(len(name))); err != nil {
		return err
	}
	if _, err := w.bw.WriteString(name); err != nil {
		return err
	}
	_, err := w.bw.Write(body)
	return err
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered returns the number of bytes waiting in the buffer.
func (w *Writer) Buffered() int { return w.bw.Buffered() }
