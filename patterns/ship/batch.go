package ship

import (
	"fmt"

	"github.com/fastmq/fastmq/internal/tail"
	"github.com/fastmq/fastmq/spool"
)

// fileKey names one file followed at a path: while a rotated file is being
// finished, one path delivers lines from two files.
type fileKey struct {
	path     string
	dev, ino uint64
}

// lastLine is the last line of one file in a batch.
type lastLine struct {
	idx int
	pos tail.Position
}

// batcher turns tailer batches into records. It is owned by Run's
// goroutine; its slices are reused from batch to batch.
type batcher struct {
	shipped map[fileKey]tail.Position // read back on start, dropped once passed
	recs    []spool.Record
	lastOf  map[fileKey]lastLine
}

// records returns the records for lines: lines at or before a read-back
// position are skipped, and the last line of each file carries its
// position. The slice is valid until the next call.
func (b *batcher) records(lines []tail.Line) []spool.Record {
	b.recs = b.recs[:0]
	clear(b.lastOf)
	for _, ln := range lines {
		k := fileKey{ln.Path, ln.Pos.Dev, ln.Pos.Ino}
		if p, ok := b.shipped[k]; ok {
			if ln.Pos.Offset <= p.Offset {
				continue // appended before the last crash
			}
			delete(b.shipped, k)
		}
		b.lastOf[k] = lastLine{len(b.recs), ln.Pos}
		b.recs = append(b.recs, spool.Record{
			Value:   ln.Text,
			Headers: []spool.Header{{Key: HeaderSource, Value: []byte(ln.Path)}},
		})
	}
	for _, ll := range b.lastOf {
		b.recs[ll.idx].Headers = append(b.recs[ll.idx].Headers, spool.Header{Key: HeaderPosition, Value: encodePosition(ll.pos)})
	}
	return b.recs
}

func encodePosition(p tail.Position) []byte {
	return fmt.Appendf(nil, "%d:%d:%d", p.Dev, p.Ino, p.Offset)
}

func decodePosition(path string, b []byte) (tail.Position, bool) {
	p := tail.Position{Path: path}
	if _, err := fmt.Sscanf(string(b), "%d:%d:%d", &p.Dev, &p.Ino, &p.Offset); err != nil {
		return p, false
	}
	return p, true
}

// readBack reads the newest window records of l and returns, per file,
// the position after the last line shipped from it.
func readBack(l *spool.Log, window uint64) (map[fileKey]tail.Position, error) {
	out := make(map[fileKey]tail.Position)
	next := l.NextOffset()
	from := l.OldestOffset()
	if next-from > window {
		from = next - window
	}
	for from < next {
		data, n, err := l.ReadRaw(from, 4<<20)
		if err != nil {
			return nil, fmt.Errorf("read back shipped positions: %w", err)
		}
		if len(data) == 0 || n <= from {
			break
		}
		err = spool.DecodeBatches(data, from, 0, func(r spool.Record) error {
			var src []byte
			for _, h := range r.Headers {
				switch h.Key {
				case HeaderSource:
					src = h.Value
				case HeaderPosition:
					if p, ok := decodePosition(string(src), h.Value); ok && src != nil {
						out[fileKey{p.Path, p.Dev, p.Ino}] = p
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read back shipped positions: %w", err)
		}
		from = n
	}
	return out, nil
}
