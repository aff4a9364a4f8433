package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/collect"
)

func init() {
	var nf nodeFlags
	var stream, out, name string
	collectCmd := &cobra.Command{
		Use:   "collect",
		Short: "Pull a stream from every shipper and write one file per source host",
		Long: `collect pulls --stream from every publisher in the mesh and appends each
record as a line to OUT/<publisher>.log. The position of each file is kept next
to it and written only after the file is synced, so a restart neither loses nor
repeats lines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return errors.New("--stream is required")
			}
			if out == "" {
				return errors.New("--out is required")
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				col, err := collect.New(collect.Config{
					Dir:       out,
					Stream:    stream,
					Name:      name,
					Discovery: n.Membership(),
					Logger:    n.Logger(),
				})
				if err != nil {
					return err
				}
				err = col.Run(ctx)
				if errors.Is(err, context.Canceled) && ctx.Err() != nil {
					err = nil
				}
				return errors.Join(err, col.Close())
			})
		},
	}
	nf.register(collectCmd, "name", hostnameOr("collector"))
	collectCmd.Flags().StringVar(&stream, "stream", "", "stream to collect (required)")
	collectCmd.Flags().StringVar(&out, "out", "", "directory for the per-source files (required)")
	collectCmd.Flags().StringVar(&name, "consumer", "collect", "consumer name, for logs and metrics")
	rootCmd.AddCommand(collectCmd)
}
