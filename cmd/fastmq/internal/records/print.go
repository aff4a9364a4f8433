package records

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/fastmq/fastmq/spool"
)

// Print writes the records of l from offset from to out, one value per
// line or, with asJSON, one JSON record per line (see JSONHelp): count
// records (0: no limit), then stops at the end of the log unless follow
// is set, when it waits for more until ctx ends. Damage is never a clean
// end: where the valid data of a read-only log ends at damage, the records
// before it are printed and the damage (a *spool.CorruptError) returned.
// Without follow, from past the end of the log is an error.
func Print(ctx context.Context, l *spool.Log, from, count uint64, follow, asJSON bool, out io.Writer) error {
	if next := l.NextOffset(); from > next && !follow {
		if err := l.Damage(); err != nil {
			return err
		}
		if next = l.NextOffset(); from > next {
			return fmt.Errorf("offset %d is past the end of the log: the next offset is %d", from, next)
		}
	}
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
				return l.Damage() // the end, unless damage ends the valid data here
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
