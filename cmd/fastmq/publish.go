package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
)

func init() {
	var nf nodeFlags
	var stream string
	var ack bool
	publish := &cobra.Command{
		Use:   "publish",
		Short: "Append stdin lines to a local stream and serve them to consumers until SIGINT/SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return errors.New("--stream is required")
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				l, err := n.Stream(stream)
				if err != nil {
					return err
				}
				if err := records.Append(ctx, l, cmd.InOrStdin(), cmd.OutOrStdout(), ack); err != nil {
					return err
				}
				// Keep serving what was published until told to stop.
				<-ctx.Done()
				return nil
			})
		},
	}
	nf.register(publish, "name", hostnameOr("publisher"))
	publish.Flags().StringVar(&stream, "stream", "", "stream to publish to (required)")
	publish.Flags().BoolVar(&ack, "ack", false, "print each record's offset once it is durable")
	rootCmd.AddCommand(publish)
}
