package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/tail"
	"github.com/fastmq/fastmq/spool"
)

// Header keys set on shipped records.
const (
	headerSource   = "source" // the file a line came from
	headerPosition = "pos"    // dev:ino:offset just after the line
)

func init() {
	var nf nodeFlags
	var stream string
	var files []string
	var fromEnd bool
	ship := &cobra.Command{
		Use:   "ship",
		Short: "Follow files like tail -F and append their lines to a local stream served to collectors",
		Long: `ship follows each --file like tail -F (through rotation and truncation) and
appends every line to the local spool of --stream, from which collectors pull.
Its read positions are kept under --data, committed after each batch is
durable in the spool, so a restart neither skips nor repeats lines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return errors.New("--stream is required")
			}
			if len(files) == 0 {
				return errors.New("at least one --file is required")
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				return shipFiles(ctx, n, stream, files, fromEnd)
			})
		},
	}
	nf.register(ship, "name", hostnameOr("shipper"))
	ship.Flags().StringVar(&stream, "stream", "", "stream to append to (required)")
	ship.Flags().StringSliceVar(&files, "file", nil, "file to follow (repeatable)")
	ship.Flags().BoolVar(&fromEnd, "from-end", false, "start new files at their end instead of their beginning")
	rootCmd.AddCommand(ship)
}

// shipFiles tails files into the node's stream until ctx ends.
//
// Exactly once across crashes: the tailer's positions are committed after
// each batch is durable in the spool, which leaves one batch that may be
// appended but not committed when the process dies. So the last line of each
// file in every batch carries its position in a header; on start the
// positions in the newest records are read back and lines at or before them
// are skipped when the tailer delivers them again.
func shipFiles(ctx context.Context, n *fastmq.Node, stream string, files []string, fromEnd bool) error {
	l, err := n.Stream(stream)
	if err != nil {
		return err
	}
	shipped, err := lastShipped(l)
	if err != nil {
		return err
	}
	t, err := tail.New(tail.Config{
		Paths:      files,
		StateFile:  filepath.Join(n.DataDir(), "ship-"+stream+".positions"),
		StartAtEnd: fromEnd,
		Logger:     n.Logger(),
	})
	if err != nil {
		return err
	}
	defer t.Close()
	recs := make([]spool.Record, 0, 1024)
	type lastLine struct {
		idx int
		pos tail.Position
	}
	lastOf := make(map[fileKey]lastLine)
	err = t.Run(ctx, func(lines []tail.Line) error {
		recs = recs[:0]
		clear(lastOf)
		for _, ln := range lines {
			k := fileKey{ln.Path, ln.Pos.Dev, ln.Pos.Ino}
			if p, ok := shipped[k]; ok {
				if ln.Pos.Offset <= p.Offset {
					continue // appended before the last crash
				}
				delete(shipped, k)
			}
			lastOf[k] = lastLine{len(recs), ln.Pos}
			recs = append(recs, spool.Record{
				Value:   ln.Text,
				Headers: []spool.Header{{Key: headerSource, Value: []byte(ln.Path)}},
			})
		}
		for _, ll := range lastOf {
			recs[ll.idx].Headers = append(recs[ll.idx].Headers, spool.Header{Key: headerPosition, Value: encodePosition(ll.pos)})
		}
		if len(recs) == 0 {
			return nil
		}
		if _, err := l.Append(ctx, recs...); err != nil {
			return fmt.Errorf("append to stream %q: %w", stream, err)
		}
		// Persist the positions of the batches handled before this one
		// (this batch's are persisted on the next call or on exit). They
		// are durable in the spool: Sync covers --sync none as well.
		if err := l.Sync(); err != nil {
			return fmt.Errorf("sync stream %q: %w", stream, err)
		}
		return t.Commit()
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		if err := l.Sync(); err != nil {
			return err
		}
		return t.Commit()
	}
	return err
}

func encodePosition(p tail.Position) []byte {
	return []byte(fmt.Sprintf("%d:%d:%d", p.Dev, p.Ino, p.Offset))
}

func decodePosition(path string, b []byte) (tail.Position, bool) {
	p := tail.Position{Path: path}
	if _, err := fmt.Sscanf(string(b), "%d:%d:%d", &p.Dev, &p.Ino, &p.Offset); err != nil {
		return p, false
	}
	return p, true
}

// fileKey names one file followed at a path: while a rotated file is being
// finished, one path delivers lines from two files.
type fileKey struct {
	path     string
	dev, ino uint64
}

// lastShipped reads the newest records of the stream and returns, per
// file, the position after the last line shipped from it.
func lastShipped(l *spool.Log) (map[fileKey]tail.Position, error) {
	out := make(map[fileKey]tail.Position)
	next := l.NextOffset()
	const window = 8192 // more than one tailer batch
	from := l.OldestOffset()
	if next > from+window {
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
				case headerSource:
					src = h.Value
				case headerPosition:
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
