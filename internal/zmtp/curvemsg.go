package zmtp

import (
	"encoding/binary"
	"fmt"
	"math"

	"golang.org/x/crypto/nacl/box"
)

// Flag bits inside a CURVE MESSAGE's plaintext, as libzmq sets them
// (msg_t::more and msg_t::command): they differ from the frame flags.
const (
	curveMore    = 0x01
	curveCommand = 0x02
)

// messageHead is the command-name part of a MESSAGE frame body.
const messageHead = "\x07MESSAGE"

// curveOverhead is what a MESSAGE adds to a frame's body: command name,
// short nonce, MAC and the flags byte.
const curveOverhead = len(messageHead) + 8 + boxOverhead + 1

// curveIn decrypts the MESSAGE commands a Reader receives after a CURVE
// handshake. It belongs to the Reader's goroutine.
type curveIn struct {
	key    *[32]byte
	prefix [16]byte     // "CurveZMQMESSAGEC" or "...S": the sender's side
	last   uint64       // the last short nonce accepted
	pend   []plainFrame // decrypted ahead by Complete: pend[pi:] are due
	pi     int
	err    error  // found while decrypting ahead; reported after pend
	block  []byte // plaintext of small frames is carved from it
}

type plainFrame struct {
	flags byte
	body  []byte
}

// curveOut encrypts what a Writer sends after a CURVE handshake. It
// belongs to the Writer's goroutine.
type curveOut struct {
	key     *[32]byte
	prefix  [16]byte
	next    uint64 // the next short nonce to use
	scratch []byte
}

// curveLimit is the largest MESSAGE frame accepted: a frame as large as the
// message limit, or a command as large as the command limit, plus
// overhead; 0 means no limit.
func (r *Reader) curveLimit() uint64 {
	if r.MaxMsgSize <= 0 {
		return 0
	}
	limit := uint64(64 << 10)
	if r.MaxCmdSize > 0 {
		limit = uint64(r.MaxCmdSize)
	}
	return max(limit, uint64(r.MaxMsgSize)) + uint64(curveOverhead)
}

// curveFrame returns the next decrypted frame: one decrypted ahead by
// Complete, or the next MESSAGE read from the stream.
func (r *Reader) curveFrame() (plainFrame, error) {
	c := r.curve
	if c.pi < len(c.pend) {
		pf := c.pend[c.pi]
		c.pend[c.pi] = plainFrame{}
		if c.pi++; c.pi == len(c.pend) {
			c.pend, c.pi = c.pend[:0], 0
		}
		return pf, nil
	}
	if c.err != nil {
		return plainFrame{}, c.err
	}
	return r.curveRead()
}

// curveRead reads and decrypts the next MESSAGE from the stream.
func (r *Reader) curveRead() (plainFrame, error) {
	flags, size, err := r.header()
	if err != nil {
		return plainFrame{}, err
	}
	// libzmq sends MESSAGE as a data frame (flags 0) and accepts that
	// only; RFC 26 calls it a command. Either is taken, never MORE.
	if flags&FlagMore != 0 {
		return plainFrame{}, fmt.Errorf("%w: frame with MORE where only MESSAGE may come", ErrCurve)
	}
	if l := r.curveLimit(); l > 0 && size > l {
		return plainFrame{}, fmt.Errorf("%w: MESSAGE of %d bytes (limit %d)", ErrTooLarge, size, l)
	}
	if size < uint64(curveOverhead) {
		return plainFrame{}, fmt.Errorf("%w: MESSAGE of %d bytes", ErrCurve, size)
	}
	b, err := r.body(size)
	if err != nil {
		return plainFrame{}, unexpected(err)
	}
	return r.curve.open(b)
}

// open checks and decrypts the body of one MESSAGE command frame.
func (c *curveIn) open(b []byte) (plainFrame, error) {
	if len(b) < len(messageHead) || string(b[:len(messageHead)]) != messageHead {
		cmd, err := ParseCommand(b)
		if err == nil && cmd.Name == CmdError {
			if reason, err := ParseError(cmd.Body); err == nil {
				return plainFrame{}, fmt.Errorf("%w: %q", ErrPeerError, reason)
			}
		}
		return plainFrame{}, fmt.Errorf("%w: command other than MESSAGE after the handshake", ErrCurve)
	}
	if len(b) < curveOverhead {
		return plainFrame{}, fmt.Errorf("%w: MESSAGE of %d bytes", ErrCurve, len(b))
	}
	b = b[len(messageHead):]
	nonce := binary.BigEndian.Uint64(b)
	if nonce <= c.last {
		return plainFrame{}, fmt.Errorf("%w: MESSAGE nonce %d not after %d (replayed or reordered)", ErrCurve, nonce, c.last)
	}
	n := fullNonce(&c.prefix, nonce)
	sealed := b[8:]
	var dst []byte
	if k := len(sealed) - boxOverhead; k <= sliceMax {
		if cap(c.block)-len(c.block) < k {
			c.block = make([]byte, 0, 64<<10)
		}
		dst = c.block[len(c.block):len(c.block)]
	}
	pt, ok := box.OpenAfterPrecomputation(dst, sealed, &n, c.key)
	if !ok {
		return plainFrame{}, fmt.Errorf("%w: MESSAGE %d does not decrypt", ErrCurve, nonce)
	}
	if dst != nil {
		c.block = c.block[:len(c.block)+len(pt)]
	}
	c.last = nonce
	return plainFrame{flags: pt[0], body: pt[1:len(pt):len(pt)]}, nil
}

// nextCurve is Next after a CURVE handshake: every frame arrives as a
// MESSAGE command whose plaintext says whether it is a command or a data
// frame with more to follow.
func (r *Reader) nextCurve(frames [][]byte) ([][]byte, Command, error) {
	frames = frames[:0]
	var total uint64
	for {
		pf, err := r.curveFrame()
		if err != nil {
			if len(frames) > 0 {
				err = unexpected(err)
			}
			return nil, Command{}, err
		}
		if pf.flags&curveCommand != 0 {
			if len(frames) > 0 {
				return nil, Command{}, fmt.Errorf("%w: command inside a multipart message", ErrFrame)
			}
			if pf.flags&curveMore != 0 {
				return nil, Command{}, fmt.Errorf("%w: command with MORE flag", ErrFrame)
			}
			cmd, err := ParseCommand(pf.body)
			return nil, cmd, err
		}
		if r.MaxFrames > 0 && len(frames) >= r.MaxFrames {
			return nil, Command{}, fmt.Errorf("%w: more than %d frames", ErrTooLarge, r.MaxFrames)
		}
		size := uint64(len(pf.body))
		total += size
		if r.MaxMsgSize > 0 && total > uint64(r.MaxMsgSize) {
			return nil, Command{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.MaxMsgSize)
		}
		frames = append(frames, pf.body)
		if pf.flags&curveMore == 0 {
			return frames, Command{}, nil
		}
	}
}

// completeCurve is Complete after a CURVE handshake. The MORE bit is
// inside the ciphertext, so it decrypts the whole frames already buffered
// (in order, so the nonce checks hold) until one ends a unit.
func (r *Reader) completeCurve() bool {
	c := r.curve
	for _, pf := range c.pend[c.pi:] {
		if pf.flags&curveMore == 0 || pf.flags&curveCommand != 0 {
			return true
		}
	}
	for c.err == nil {
		if !r.frameBuffered() {
			return false
		}
		pf, err := r.curveRead()
		if err != nil {
			c.err = err
			return true
		}
		c.pend = append(c.pend, pf)
		if pf.flags&curveMore == 0 || pf.flags&curveCommand != 0 {
			return true
		}
	}
	return true
}

// frameBuffered reports whether one whole frame is buffered.
func (r *Reader) frameBuffered() bool {
	b := r.buf[r.r:r.w]
	if len(b) < 2 {
		return false
	}
	size, h := uint64(b[1]), 2
	if b[0]&FlagLong != 0 {
		if len(b) < 9 {
			return false
		}
		size, h = binary.BigEndian.Uint64(b[1:9]), 9
	}
	return uint64(len(b)-h) >= size
}

// sealFrame writes one frame as a MESSAGE: a data frame (flags
// FlagMore or none), a command frame whose body holds its name (flags
// FlagCommand), or the command name with body. A command's plaintext
// carries its name, as in libzmq.
func (w *Writer) sealFrame(flags byte, name string, body []byte) error {
	if w.err != nil {
		return w.err
	}
	c := w.curve
	if c.next == math.MaxUint64 {
		return fmt.Errorf("%w: nonces exhausted", ErrCurve)
	}
	var pf byte
	if flags&FlagMore != 0 {
		pf |= curveMore
	}
	if flags&FlagCommand != 0 {
		pf |= curveCommand
	}
	pt := c.scratch[:0]
	if name != "" {
		if len(name) > 255 {
			return fmt.Errorf("%w: name length %d", ErrCommand, len(name))
		}
		pt = append(pt, pf|curveCommand, byte(len(name)))
		pt = append(pt, name...)
	} else {
		pt = append(pt, pf)
	}
	pt = append(pt, body...)
	nonce := c.next
	c.next++
	n := fullNonce(&c.prefix, nonce)
	size := len(messageHead) + 8 + boxOverhead + len(pt)
	var h [9 + len(messageHead) + 8]byte
	// As a data frame, as libzmq sends it: libzmq would take a MESSAGE in a
	// command frame for a command whatever its plaintext says.
	head := appendHeader(h[:0], 0, size)
	head = append(head, messageHead...)
	head = binary.BigEndian.AppendUint64(head, nonce)
	if len(w.buf)+len(head)+boxOverhead+len(pt) <= cap(w.buf) {
		w.buf = append(w.buf, head...)
		w.buf = box.SealAfterPrecomputation(w.buf, pt, &n, c.key)
	} else if err := w.write(head, box.SealAfterPrecomputation(nil, pt, &n, c.key)); err != nil {
		return err
	}
	if cap(pt) > 1<<20 {
		pt = nil // do not keep a huge frame's buffer
	}
	c.scratch = pt[:0]
	return nil
}
