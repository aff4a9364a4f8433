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
	headerSource = "source" // the file a line came from
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
func shipFiles(ctx context.Context, n *fastmq.Node, stream string, files []string, fromEnd bool) error {
	l, err := n.Stream(stream)
	if err != nil {
		return err
	}
	t, err := tail.New(tail.Config{
		Paths:      files,
		StateFile:  filepath.Join(n.DataDir(), "ship-"+stream+".positions"),
		StartAtEnd: fromEnd,
	})
	if err != nil {
		return err
	}
	defer t.Close()
	recs := make([]spool.Record, 0, 1024)
	err = t.Run(ctx, func(lines []tail.Line) error {
		recs = recs[:0]
		for _, ln := range lines {
			recs = append(recs, spool.Record{
				Value:   ln.Text,
				Headers: []spool.Header{{Key: headerSource, Value: []byte(ln.Path)}},
			})
		}
		if _, err := l.Append(ctx, recs...); err != nil {
			return fmt.Errorf("append to stream %q: %w", stream, err)
		}
		// Persist the positions of the batches handled before this one;
		// this batch's positions are persisted on the next call or on exit.
		return t.Commit()
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return t.Commit()
	}
	return err
}
