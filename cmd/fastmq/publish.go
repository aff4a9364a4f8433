package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
)

func init() {
	var nf nodeFlags
	var stream string
	var ack, dedup, keyed bool
	var idHeader string
	var delay time.Duration
	publish := &cobra.Command{
		Use:   "publish",
		Short: "Append stdin lines to a local stream and serve them to consumers until SIGINT/SIGTERM",
		Long: "Append stdin lines to a local stream, one record per line, and serve them to\n" +
			"consumers until SIGINT/SIGTERM.\n\n" + records.DedupHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return errors.New("--stream is required")
			}
			if dedup && idHeader != "" {
				return errors.New("--dedup and --id-header exclude each other: the id is either the line's hash or its first field")
			}
			if cmd.Flags().Changed("id-header") && idHeader == "" {
				return errors.New("--id-header needs a header name")
			}
			if delay < 0 {
				return fmt.Errorf("--delay %v: must not be negative", delay)
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				l, err := n.Stream(stream)
				if errors.Is(err, fastmq.ErrStreamDamaged) {
					// Stopping would stop serving the node's other
					// streams and this one's records up to the damage.
					fmt.Fprintf(cmd.ErrOrStderr(), "publish: appends refused until the stream is repaired (stop, then fastmq spool repair --dir %s); its records up to the damage and the other streams are still served: %v\n",
						filepath.Join(nf.data, "streams", stream), err)
					<-ctx.Done()
					return nil
				}
				if err != nil {
					return err
				}
				opt := records.Options{Ack: ack, IDHeader: idHeader, Dedup: dedup, Keyed: keyed, Delay: delay, Errs: cmd.ErrOrStderr()}
				if err := records.AppendWith(ctx, l, cmd.InOrStdin(), cmd.OutOrStdout(), opt); err != nil {
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
	publish.Flags().BoolVar(&ack, "ack", false, "print each record's offset once it is durable (a duplicate: the offset it repeats, then \"duplicate\"; a record refused for lack of space: \"refused: REASON\")")
	publish.Flags().BoolVar(&dedup, "dedup", false, "idempotent publish: each line's message id is a hash of the line (see above)")
	publish.Flags().StringVar(&idHeader, "id-header", "", "idempotent publish: each line is ID<TAB>VALUE; ID is the message id and the value of header `NAME`")
	publish.Flags().BoolVar(&keyed, "keyed", false, "each line is KEY<TAB>VALUE: KEY is the record's key, for ordered consumer groups (see above)")
	publish.Flags().DurationVar(&delay, "delay", 0, "consumer groups do not lease a record before this long after it was read (0: at once)")
	rootCmd.AddCommand(publish)
}
