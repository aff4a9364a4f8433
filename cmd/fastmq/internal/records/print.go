package records

import (
	"bufio"
	"context"
	"io"

	"github.com/fastmq/fastmq/spool"
)

// Print writes the records of l from offset from to out, one value per
// line or, with asJSON, one JSON record per line (see JSONHelp): count
// records (0: no limit), then stops at the end of the log unless follow
// is set, when it waits for more until ctx ends.
func Print(ctx context.Context, l *spool.Log, from, count uint64, follow, asJSON bool, out io.Writer) error {
	r, err := l.NewReader(from)
	if err != nil {
		return err
	}
	defer r.Close()
	w := bufio.NewWriter(out)
	defer w.Flush()
	enc := NewEncoder(w)
	for n := uint64(0); count == 0 || n < count; n++ {
		if r.Offset() >= l.NextOffset() {
			if !follow {
				return nil
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		rec, err := r.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if asJSON {
			if err := enc.Encode("", "", rec.Offset, rec.ID, rec.Time, rec.Headers, rec.Value); err != nil {
				return err
			}
		} else {
			w.Write(rec.Value)
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
	return nil
}
