package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
)

// groupConsume is `fastmq consume --group`: one member of a consumer
// group.
type groupConsume struct {
	group       string
	ackWait     time.Duration
	maxDeliver  int
	concurrency int
	command     string
}

const groupConsumeHelp = "With --group, joins that consumer group of --stream as one member: the members of a group " +
	"share the stream's records (each record goes to one member, leased for --ack-wait), every group gets " +
	"every record. Without --exec, prints each record's value on its own line and acknowledges it once " +
	"written. With --exec, runs the command (through sh -c) per record with the value on stdin and " +
	"FASTMQ_PUBLISHER, FASTMQ_OFFSET and FASTMQ_DELIVERY in its environment: exit 0 acknowledges the " +
	"record, another status naks it (redelivered after the backoff; after --max-deliver deliveries it goes " +
	"to the dead-letter stream STREAM.GROUP.dlq, see fastmq dlq). --from places a new group's cursor."

// register adds the group flags to the consume command.
func (g *groupConsume) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&g.group, "group", "", "consumer group to join: the group's members share the records (see above)")
	fl.StringVar(&g.command, "exec", "", "with --group: run this shell command per record, value on stdin: exit 0 acks, non-zero naks")
	fl.DurationVar(&g.ackWait, "ack-wait", group.DefaultAckWait, "with --group: lease length: a record not acknowledged within it is redelivered")
	fl.IntVar(&g.maxDeliver, "max-deliver", group.DefaultMaxDeliver, "with --group: deliveries before a record goes to the dead-letter stream (-1: unlimited)")
	fl.IntVar(&g.concurrency, "concurrency", 1, "with --group: records processed at once")
}

// groupStart parses --from for a group: earliest, latest, an offset or an
// RFC 3339 time.
func groupStart(s string) (group.Position, error) {
	switch s {
	case "", "earliest":
		return group.Earliest(), nil
	case "latest":
		return group.Latest(), nil
	}
	if o, err := strconv.ParseUint(s, 10, 64); err == nil {
		return group.AtOffset(o), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return group.AtTime(t), nil
	}
	return group.Position{}, fmt.Errorf("%q: want earliest, latest, an offset or an RFC 3339 time", s)
}

// run joins the group as one member and processes records until ctx ends
// or count records were processed (0: no limit).
func (g *groupConsume) run(ctx context.Context, n *fastmq.Node, stream, from string, count uint64, out, errOut io.Writer) error {
	pos, err := groupStart(from)
	if err != nil {
		return fmt.Errorf("--from %w", err)
	}
	m, err := n.Group(fastmq.GroupConfig{Stream: stream, Group: g.group, Member: group.MemberConfig{
		AckWait: g.ackWait, MaxDeliver: g.maxDeliver, Buffer: max(g.concurrency, 1), Start: pos.Start, StartValue: pos.Value}})
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Uint64
	err = m.Run(ctx, g.concurrency, func(ctx context.Context, msg *group.Message) error {
		if g.command == "" {
			if _, err := out.Write(append(append([]byte(nil), msg.Value...), '\n')); err != nil {
				return err
			}
		} else {
			c := exec.CommandContext(ctx, "sh", "-c", g.command)
			c.Stdin = bytes.NewReader(msg.Value)
			c.Stdout, c.Stderr = out, errOut
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
}

// groupConsumeAliasCmd is `fastmq group consume`, the earlier spelling of
// `fastmq consume --group`, kept as a hidden alias.
func groupConsumeAliasCmd() *cobra.Command {
	var nf nodeFlags
	var g groupConsume
	var stream, from string
	var count uint64
	cmd := &cobra.Command{
		Use:        "consume",
		Short:      "Alias of fastmq consume --group",
		Long:       groupConsumeHelp,
		Hidden:     true,
		Deprecated: "use fastmq consume --stream S --group G",
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || g.group == "" {
				return fmt.Errorf("--stream and --group are required")
			}
			if nf.name == "" {
				nf.name = hostnameOr("member") + "-" + g.group + fmt.Sprintf("-%d", os.Getpid())
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				return g.run(ctx, n, stream, from, count, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	nf.register(cmd, "node-name", "")
	g.register(cmd)
	cmd.Flags().StringVar(&stream, "stream", "", "stream to consume (required)")
	cmd.Flags().StringVar(&from, "from", "earliest", "where a new group starts: earliest, latest, OFFSET or RFC3339 time")
	cmd.Flags().Uint64Var(&count, "count", 0, "exit after N records processed (0 = run until SIGINT)")
	return cmd
}
