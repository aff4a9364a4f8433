package records

import "io"

// pipeAtomic is the size up to which a write to a pipe is atomic (POSIX
// PIPE_BUF on Linux): the reader gets all of it or none of it.
const pipeAtomic = 4096

// LineWriter buffers whole lines and writes them out in chunks that end
// at a line's end, each at most 4 KiB where the lines allow, so that a
// process killed while writing to a pipe leaves no half line behind (a
// single line longer than 4 KiB is written on its own, and only that one
// could be cut). Callers write whole lines (ending in '\n') and learn from
// Flush's success that everything written so far reached w.
type LineWriter struct {
	w   io.Writer
	buf []byte
}

// NewLineWriter returns a LineWriter on w.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

// Write buffers p; it never fails.
func (l *LineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// Buffered returns how many bytes wait for Flush.
func (l *LineWriter) Buffered() int { return len(l.buf) }

// Flush writes every buffered byte to w, in chunks that end at line ends.
func (l *LineWriter) Flush() error {
	for len(l.buf) > 0 {
		n := len(l.buf)
		if n > pipeAtomic {
			n = lastLineEnd(l.buf[:pipeAtomic])
			if n == 0 { // one line longer than the atomic size
				n = firstLineEnd(l.buf)
			}
		}
		if _, err := l.w.Write(l.buf[:n]); err != nil {
			return err
		}
		l.buf = l.buf[n:]
	}
	l.buf = l.buf[:0]
	return nil
}

// lastLineEnd returns the length of the longest prefix of b that ends with
// '\n', or 0.
func lastLineEnd(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i + 1
		}
	}
	return 0
}

// firstLineEnd returns the length of b's first line with its '\n', or
// len(b) when there is none.
func firstLineEnd(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i + 1
		}
	}
	return len(b)
}
