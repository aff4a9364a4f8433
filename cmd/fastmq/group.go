package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
)

func init() {
	grp := &cobra.Command{
		Use:   "group",
		Short: "Consumer groups: members share a stream's records, each record to one of them",
	}
	var nf nodeFlags
	var stream, name, command string
	var ackWait time.Duration
	var maxDeliver, concurrency int
	var count uint64
	consume := &cobra.Command{
		Use:   "consume",
		Short: "Join a consumer group of a stream and process its records",
		Long: "Joins --group of --stream as one member: the members of a group share the stream's records " +
			"(each record goes to one member), every group gets every record.\n\n" +
			"Without --exec, prints each record's value on its own line and acknowledges it once written. " +
			"With --exec, runs the command (through sh -c) per record with the value on stdin: exit 0 " +
			"acknowledges it, another status naks it (redelivered after the backoff; after --max-deliver " +
			"deliveries it goes to the dead-letter stream STREAM.GROUP.dlq).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			if nf.name == "" {
				nf.name = hostnameOr("member") + "-" + name + fmt.Sprintf("-%d", os.Getpid())
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				if err := n.ServeGroups(); err != nil {
					return err
				}
				m, err := n.Group(fastmq.GroupConfig{Stream: stream, Group: name, Member: group.MemberConfig{
					AckWait: ackWait, MaxDeliver: maxDeliver, Buffer: max(concurrency, 1)}})
				if err != nil {
					return err
				}
				defer m.Close()
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				var done atomic.Uint64
				out := cmd.OutOrStdout()
				err = m.Run(ctx, concurrency, func(ctx context.Context, msg *group.Message) error {
					if command == "" {
						if _, err := out.Write(append(append([]byte(nil), msg.Value...), '\n')); err != nil {
							return err
						}
					} else {
						c := exec.CommandContext(ctx, "sh", "-c", command)
						c.Stdin = bytes.NewReader(msg.Value)
						c.Stdout, c.Stderr = out, cmd.ErrOrStderr()
						c.Env = append(os.Environ(), fmt.Sprintf("FASTMQ_PUBLISHER=%s", msg.Publisher),
							fmt.Sprintf("FASTMQ_OFFSET=%d", msg.Offset), fmt.Sprintf("FASTMQ_DELIVERY=%d", msg.Delivery))
						if err := c.Run(); err != nil {
							return err
						}
					}
					if count > 0 && done.Add(1) >= count {
						cancel()
					}
					return nil
				})
				if ctx.Err() != nil {
					return nil
				}
				return err
			})
		},
	}
	nf.register(consume, "node-name", "")
	fl := consume.Flags()
	fl.StringVar(&stream, "stream", "", "stream to consume (required)")
	fl.StringVar(&name, "group", "", "consumer group to join (required)")
	fl.StringVar(&command, "exec", "", "run this shell command per record, value on stdin: exit 0 acks, non-zero naks")
	fl.DurationVar(&ackWait, "ack-wait", group.DefaultAckWait, "lease length: a record not acknowledged within it is redelivered")
	fl.IntVar(&maxDeliver, "max-deliver", group.DefaultMaxDeliver, "deliveries before a record goes to the dead-letter stream (-1: unlimited)")
	fl.IntVar(&concurrency, "concurrency", 1, "records processed at once")
	fl.Uint64Var(&count, "count", 0, "exit after N records processed (0 = run until SIGINT)")
	grp.AddCommand(consume, groupInfoCmd())
	rootCmd.AddCommand(grp)
}

// groupInfoCmd is `fastmq group info`: the group's state on every
// publisher of the stream.
func groupInfoCmd() *cobra.Command {
	var nf nodeFlags
	var stream, name string
	var wait time.Duration
	info := &cobra.Command{
		Use:   "info",
		Short: "Show a consumer group's state on every publisher of its stream",
		Long: "Joins the mesh, finds the publishers of --stream and prints, per publisher: the group's floor " +
			"(all below settled), cursor, the stream's end, lag, records pending (leased or waiting for " +
			"redelivery), members holding leases, and the counters since the publisher started.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			if nf.name == "" {
				nf.name = hostnameOr("group-info") + fmt.Sprintf("-%d", os.Getpid())
			}
			ncfg, err := nf.config()
			if err != nil {
				return err
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				// Gossip needs a moment to tell us the publishers.
				deadline := time.Now().Add(wait)
				insts := n.Membership().LookupStream(stream)
				for len(insts) == 0 && time.Now().Before(deadline) {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(100 * time.Millisecond):
					}
					insts = n.Membership().LookupStream(stream)
				}
				if len(insts) == 0 {
					return fmt.Errorf("no publisher of %q found", stream)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "PUBLISHER\tFLOOR\tCURSOR\tEND\tLAG\tPENDING\tMEMBERS\tDELIVERED\tREDELIVERED\tACKED\tNAKED\tEXPIRED\tDEAD")
				for _, in := range insts {
					if len(in.Service.Endpoints) == 0 {
						continue
					}
					ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
					st, err := group.Info(ictx, in.Service.Endpoints[0], stream, name, ncfg.Socket)
					cancel()
					if err != nil {
						fmt.Fprintf(w, "%s\t%v\n", in.Node, err)
						continue
					}
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", in.Node, st.Floor, st.Next, st.High,
						st.High-st.Floor, st.Pending, st.Members, st.Delivered, st.Redelivered, st.Acked, st.Naked, st.Expired, st.DeadLetters)
				}
				return w.Flush()
			})
		},
	}
	nf.register(info, "node-name", "")
	info.Flags().StringVar(&stream, "stream", "", "stream (required)")
	info.Flags().StringVar(&name, "group", "", "consumer group (required)")
	info.Flags().DurationVar(&wait, "wait", 5*time.Second, "how long to wait for gossip to find the publishers")
	return info
}
