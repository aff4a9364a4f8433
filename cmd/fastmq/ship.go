package main

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/ship"
)

func init() {
	var nf nodeFlags
	var stream string
	var files []string
	var fromEnd bool
	shipCmd := &cobra.Command{
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
	nf.register(shipCmd, "name", hostnameOr("shipper"))
	shipCmd.Flags().StringVar(&stream, "stream", "", "stream to append to (required)")
	shipCmd.Flags().StringSliceVar(&files, "file", nil, "file to follow (repeatable)")
	shipCmd.Flags().BoolVar(&fromEnd, "from-end", false, "start new files at their end instead of their beginning")
	rootCmd.AddCommand(shipCmd)
}

// shipFiles ships files into the node's stream until ctx ends (see
// package ship for the exactly-once protocol).
func shipFiles(ctx context.Context, n *fastmq.Node, stream string, files []string, fromEnd bool) error {
	l, err := n.Stream(stream)
	if err != nil {
		return err
	}
	s, err := ship.New(ship.Config{
		Spool:      l,
		Stream:     stream,
		Paths:      files,
		StateFile:  filepath.Join(n.DataDir(), "ship-"+stream+".positions"),
		StartAtEnd: fromEnd,
		Logger:     n.Logger(),
	})
	if err != nil {
		return err
	}
	err = s.Run(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil
	}
	return errors.Join(err, s.Close())
}
