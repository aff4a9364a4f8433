package zmtp

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
)

// Frame flag bits (RFC 23).
const (
	FlagMore    = 0x01
	FlagLong    = 0x02
	FlagCommand = 0x04
	flagsMask   = FlagMore | FlagLong | FlagCommand
)

// chunk is the largest allocation made for a frame body before any of its
// bytes have arrived. A bigger body's buffer then at most doubles each
// time the bytes already read fill it, so a peer that announces a large
// frame and sends little of it pins at most twice what it sent plus one
// chunk.
const chunk = 64 << 10

// Frame bodies of up to sliceMax bytes are returned as slices of the block
// they were read into: the bytes are copied once, by the kernel, and a
// block is never written again once a slice of it was handed out. Bigger
// bodies get their own allocation, read directly from the stream past
// what is already buffered.
const sliceMax = 8 << 10

// minRead is the least free space worth a read into the current block;
// with less, reading continues in a new block.
const minRead = 4 << 10

// maxEmptyReads bounds successive reads that return no data and no error.
const maxEmptyReads = 100

// Command is one decoded command frame.
type Command struct {
	Name string
	Body []byte
}

// Reader decodes ZMTP traffic from a stream. It reads into blocks that it
// never reuses: frame bodies are slices of them, so a frame is copied only
// once on its way in. It is not safe for concurrent use. An error at a
// unit boundary (such as a read timeout before the next header) leaves it
// usable; after an error inside a message or command the stream is out of
// step and the Reader must be discarded.
type Reader struct {
	rd io.Reader
	// MaxMsgSize bounds the total body size of one message; <= 0 means
	// unlimited (memory is then allocated only as bytes arrive).
	MaxMsgSize int64
	// MaxCmdSize bounds one command frame; <= 0 means 64 KiB.
	MaxCmdSize int64
	// MaxFrames bounds the number of frames in one message; <= 0 means
	// unlimited. Without it, a stream of empty frames costs memory that
	// MaxMsgSize does not see.
	MaxFrames int

	size    int    // block size
	minRead int    // least free space worth a read into the current block
	buf     []byte // current block: buf[r:w] is read but not yet decoded
	r, w    int
	err     error // read error to report once the buffered bytes are used

	curve *curveIn // set after a CURVE handshake
}

// NewReader returns a Reader that reads in blocks of size bytes
// (0 = 64 KiB).
func NewReader(rd io.Reader, size int) *Reader {
	if size <= 0 {
		size = 64 << 10
	}
	return &Reader{rd: rd, size: size, minRead: max(1, min(minRead, size/4))}
}

// ReadGreeting reads and decodes the peer's greeting.
func (r *Reader) ReadGreeting() (Greeting, error) {
	if err := r.fill(GreetingSize); err != nil {
		if r.w > r.r && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Greeting{}, fmt.Errorf("zmtp: read greeting: %w", err)
	}
	b := r.buf[r.r : r.r+GreetingSize]
	r.r += GreetingSize
	return ParseGreeting(b)
}

// Buffered returns the number of bytes read from the stream but not yet
// decoded.
func (r *Reader) Buffered() int { return r.w - r.r }

// fill reads until at least need bytes are buffered, contiguously. When
// the current block has no room for them, or too little room for a useful
// read, reading continues in a new block, which starts with the bytes not
// yet decoded. A read error is returned only once the buffered bytes
// cannot satisfy need.
func (r *Reader) fill(need int) error {
	empty := 0
	for r.w-r.r < need {
		if r.err != nil {
			err := r.err
			r.err = nil
			return err
		}
		if len(r.buf)-r.r < need || len(r.buf)-r.w < r.minRead {
			r.grow(need)
		}
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			return fmt.Errorf("zmtp: reader returned %d bytes for a %d-byte buffer", n, len(r.buf)-r.w)
		}
		r.w += n
		r.err = err
		if n == 0 && err == nil {
			if empty++; empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}

// grow moves the undecoded bytes to a new block with room for at least
// need bytes. Slices of the old block already handed out stay valid.
func (r *Reader) grow(need int) {
	n := max(r.size, need)
	if n-(r.w-r.r) < r.minRead {
		n += r.minRead
	}
	b := make([]byte, n)
	r.w = copy(b, r.buf[r.r:r.w])
	r.r = 0
	r.buf = b
}

func (r *Reader) header() (flags byte, size uint64, err error) {
	if r.w-r.r < 2 {
		if err := r.fill(1); err != nil {
			return 0, 0, err
		}
		if err := r.fill(2); err != nil {
			return 0, 0, unexpected(err)
		}
	}
	flags = r.buf[r.r]
	if flags&^flagsMask != 0 {
		return 0, 0, fmt.Errorf("%w: reserved flag bits %#x", ErrFrame, flags)
	}
	if flags&FlagLong == 0 {
		size = uint64(r.buf[r.r+1])
		r.r += 2
		return flags, size, nil
	}
	if err := r.fill(9); err != nil {
		return 0, 0, unexpected(err)
	}
	size = binary.BigEndian.Uint64(r.buf[r.r+1 : r.r+9])
	r.r += 9
	return flags, size, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// body returns the next n bytes. Small bodies are slices of the block;
// large ones get their own allocation, which grows as data arrives (see
// chunk) so that a lying length cannot make us allocate memory up front.
func (r *Reader) body(n uint64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	if n <= sliceMax {
		k := int(n)
		if r.w-r.r < k {
			if err := r.fill(k); err != nil {
				return nil, unexpected(err)
			}
		}
		b := r.buf[r.r : r.r+k : r.r+k]
		r.r += k
		return b, nil
	}
	if n > math.MaxInt-chunk {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrTooLarge, n)
	}
	b := make([]byte, min(n, chunk))
	if err := r.readFull(b); err != nil {
		return nil, unexpected(err)
	}
	for uint64(len(b)) < n {
		l := len(b)
		nb := make([]byte, min(n, 2*uint64(l)))
		copy(nb, b)
		b = nb
		if err := r.readFull(b[l:]); err != nil {
			return nil, unexpected(err)
		}
	}
	return b, nil
}

// readFull fills p with the buffered bytes first and then reads the rest
// from the stream directly, without passing through a block.
func (r *Reader) readFull(p []byte) error {
	k := copy(p, r.buf[r.r:r.w])
	r.r += k
	p = p[k:]
	if len(p) == 0 {
		return nil
	}
	if r.err != nil {
		err := r.err
		r.err = nil
		return err
	}
	for empty := 0; len(p) > 0; {
		n, err := r.rd.Read(p)
		if n < 0 || n > len(p) {
			return fmt.Errorf("zmtp: reader returned %d bytes for a %d-byte buffer", n, len(p))
		}
		p = p[n:]
		switch {
		case len(p) == 0:
			return nil
		case err != nil:
			return err
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}

// Complete reports whether a whole message or command is already buffered,
// so that the next call to Next returns without reading from the
// underlying stream. It returns true as well when the buffered bytes are
// already known to be malformed.
func (r *Reader) Complete() bool {
	if r.curve != nil {
		return r.completeCurve()
	}
	b := r.buf[r.r:r.w]
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
// the Reader; small bodies share the block they were read into (each
// slice is capped at its own length, so appending to one cannot overwrite
// another).
func (r *Reader) Next(frames [][]byte) ([][]byte, Command, error) {
	if r.curve != nil {
		return r.nextCurve(frames)
	}
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

// Writer encodes ZMTP traffic into a buffer and writes it to the
// underlying stream when the buffer fills or Flush is called. A frame too
// large for the buffer goes out in one gathered write with what is
// buffered, without being copied. It is not safe for concurrent use. After
// a write error every call returns that error.
type Writer struct {
	wr  io.Writer
	buf []byte // pending bytes; its capacity is the buffer size
	err error
	vec net.Buffers // scratch for gathered writes

	curve *curveOut // set after a CURVE handshake
}

// NewWriter returns a Writer with a buffer of size bytes (0 = 64 KiB, at
// least 512).
func NewWriter(w io.Writer, size int) *Writer {
	if size <= 0 {
		size = 64 << 10
	}
	size = max(size, 512) // room for any command header
	return &Writer{wr: w, buf: make([]byte, 0, size)}
}

// WriteGreeting writes g.
func (w *Writer) WriteGreeting(g Greeting) error {
	b := g.Marshal()
	return w.write(nil, b[:])
}

// appendHeader appends a frame header for a body of n bytes.
func appendHeader(b []byte, flags byte, n int) []byte {
	if n > 255 {
		b = append(b, flags|FlagLong)
		return binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, flags, byte(n))
}

// WriteFrame writes one frame with the given flags (FlagLong is set as
// needed).
func (w *Writer) WriteFrame(flags byte, body []byte) error {
	if w.curve != nil {
		return w.sealFrame(flags&(FlagMore|FlagCommand), "", body)
	}
	flags &^= FlagLong
	if w.err == nil && len(w.buf)+9+len(body) <= cap(w.buf) {
		w.buf = appendHeader(w.buf, flags, len(body))
		w.buf = append(w.buf, body...)
		return nil
	}
	var h [9]byte
	return w.write(appendHeader(h[:0], flags, len(body)), body)
}

// write appends head and body to the buffer, flushing as needed; a body
// that does not fit in the buffer is written directly after it.
func (w *Writer) write(head, body []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf)+len(head) > cap(w.buf) {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, head...)
	if len(w.buf)+len(body) <= cap(w.buf) {
		w.buf = append(w.buf, body...)
		return nil
	}
	if len(body) < cap(w.buf)/2 {
		if err := w.Flush(); err != nil {
			return err
		}
		w.buf = append(w.buf, body...)
		return nil
	}
	// Large: one gathered write of the buffer and the body.
	w.vec = append(w.vec[:0], w.buf, body)
	v := w.vec
	n, err := v.WriteTo(w.wr)
	if err == nil && n < int64(len(w.buf)+len(body)) {
		err = io.ErrShortWrite
	}
	clear(w.vec[:2])
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
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
	if w.curve != nil {
		return w.sealFrame(0, name, body)
	}
	var h [9 + 1 + 255]byte
	head := appendHeader(h[:0], FlagCommand, 1+len(name)+len(body))
	head = append(head, byte(len(name)))
	head = append(head, name...)
	return w.write(head, body)
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.wr.Write(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
	return err
}

// Buffered returns the number of bytes waiting in the buffer.
func (w *Writer) Buffered() int { return len(w.buf) }
