package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// groupConsume is `fastmq consume --group`: one member of a consumer
// group.
type groupConsume struct {
	group       string
	ackWait     time.Duration
	maxDeliver  int
	backoff     []time.Duration
	concurrency int
	command     string
	ordered     bool
}

// defaultBackoff is --backoff's default: a record whose command failed
// comes back after 1 s, then 5 s, then every 30 s, rather than at once
// (a command failing for a moment, a database restarting say, would
// otherwise use up its deliveries within milliseconds).
var defaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

// leaveTimeout is how long a member leaving its group waits for the
// publishers' answers.
const leaveTimeout = 5 * time.Second

// execGrace is how long a command stopped by the member's shutdown has
// between SIGTERM and SIGKILL.
const execGrace = 10 * time.Second

const groupConsumeHelp = "With --group, joins that consumer group of --stream as one member: the members of a group " +
	"share the stream's records (each record goes to one member, leased for --ack-wait), every group gets " +
	"every record. Without --exec, prints each record's value on its own line and acknowledges it once " +
	"written. With --exec, runs the command (through sh -c) per record with the value on stdin and " +
	"FASTMQ_PUBLISHER, FASTMQ_OFFSET and FASTMQ_DELIVERY in its environment: exit 0 acknowledges the " +
	"record, another status naks it: logged, and redelivered after --backoff (1 s, 5 s, then every 30 s by " +
	"default); after --max-deliver deliveries it goes to the dead-letter stream STREAM.GROUP.dlq, see fastmq " +
	"dlq. On SIGINT or SIGTERM the member stops taking records; a command still running gets SIGTERM (with " +
	"what it started), SIGKILL 10 s later unless it exited, and its record goes back to the group for another " +
	"member without counting as a failure (a command that exits 0 meanwhile acknowledges it). --from places " +
	"a new group's cursor."

// register adds the group flags to the consume command.
func (g *groupConsume) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&g.group, "group", "", "consumer group to join: the group's members share the records (see above)")
	fl.StringVar(&g.command, "exec", "", "with --group: run this shell command per record, value on stdin: exit 0 acks, non-zero naks")
	fl.DurationVar(&g.ackWait, "ack-wait", group.DefaultAckWait, "with --group: lease length: a record not acknowledged within it is redelivered")
	fl.IntVar(&g.maxDeliver, "max-deliver", group.DefaultMaxDeliver, "with --group: deliveries before a record goes to the dead-letter stream (-1: unlimited)")
	fl.DurationSliceVar(&g.backoff, "backoff", defaultBackoff, "with --group: redelivery delays after the 1st, 2nd... failed delivery, the last repeating (0: at once)")
	fl.IntVar(&g.concurrency, "concurrency", 1, "with --group: records processed at once")
	fl.BoolVar(&g.ordered, "ordered", false, "with --group, for a new group: records of one key (fastmq publish --keyed) are delivered in order, one at a time")
}

// check refuses values the flags cannot mean.
func (g *groupConsume) check() error {
	switch {
	case g.ackWait <= 0 || g.ackWait > group.MaxAckWait:
		return fmt.Errorf("--ack-wait %v: want more than 0, at most %v", g.ackWait, group.MaxAckWait)
	case g.maxDeliver == 0 || g.maxDeliver < -1:
		return fmt.Errorf("--max-deliver %d: want at least 1, or -1 for unlimited", g.maxDeliver)
	case g.concurrency < 1:
		return fmt.Errorf("--concurrency %d: want at least 1", g.concurrency)
	case len(g.backoff) == 0:
		return errors.New("--backoff: want at least one delay (0: at once)")
	}
	for _, d := range g.backoff {
		if d < 0 {
			return fmt.Errorf("--backoff %v: a delay cannot be negative", d)
		}
	}
	if err := group.CheckName(g.group); err != nil {
		return fmt.Errorf("--group: %w", err)
	}
	return nil
}

// run joins the group as one member and processes records until ctx ends
// or count records were processed (0: no limit).
func (g *groupConsume) run(ctx context.Context, n *fastmq.Node, stream string, seeds []string, from spool.Start, count uint64, out, errOut io.Writer) (err error) {
	// A permanent refusal (a publisher's ACL, a wrong gossip key, a mixed
	// CURVE mesh) ends the member with its error, as plain consume ends.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var ref refusals
	ref.watch(ctx, n, stream, seeds, stop)
	defer func() {
		if rerr := ref.Err(); rerr != nil {
			err = rerr
		}
	}()
	m, err := n.Group(fastmq.GroupConfig{Stream: stream, Group: g.group, Member: group.MemberConfig{
		AckWait: g.ackWait, MaxDeliver: g.maxDeliver, Backoff: g.backoff, Buffer: max(g.concurrency, 1), Ordered: g.ordered,
		Start: from, OnForbidden: func(err error) { ref.fail(err, stop) }}})
	if err != nil {
		return err
	}
	log := n.Logger()
	if f, ok := out.(*os.File); ok && g.command == "" && finishCutLine(f) {
		log.Warn("the output file ended in a cut line (a kill while writing): ended it with a newline")
	}
	defer func() {
		// Leave the group: the publishers give this member's leases
		// (of records buffered, or whose command was stopped) to the
		// other members at once.
		sctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		defer cancel()
		if err := m.Shutdown(sctx); err != nil {
			log.Warn("leaving the group failed: leases not released run until --ack-wait", "err", err)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Uint64
	err = m.Run(ctx, g.concurrency, func(ctx context.Context, msg *group.Message) error {
		if g.command == "" {
			if _, err := out.Write(append(append([]byte(nil), msg.Value...), '\n')); err != nil {
				return err
			}
		} else {
			c := shellCommand(ctx, g.command, execGrace)
			c.Stdin = bytes.NewReader(msg.Value)
			c.Stdout, c.Stderr = out, errOut
			c.Env = append(os.Environ(), fmt.Sprintf("FASTMQ_PUBLISHER=%s", msg.Publisher),
				fmt.Sprintf("FASTMQ_OFFSET=%d", msg.Offset), fmt.Sprintf("FASTMQ_DELIVERY=%d", msg.Delivery))
			err := c.Run()
			reap(ctx, c, execGrace)
			if err != nil && c.ProcessState != nil && c.ProcessState.Success() {
				err = nil // it finished its record, though asked to stop
			}
			if err != nil {
				if ctx.Err() != nil {
					log.Info("command stopped by the shutdown: the record goes back to the group",
						"publisher", msg.Publisher, "offset", msg.Offset, "delivery", msg.Delivery)
					return ctx.Err()
				}
				g.logFailure(log, msg, err)
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

// logFailure logs a command that failed on msg, and what happens to the
// record next.
func (g *groupConsume) logFailure(log *slog.Logger, msg *group.Message, err error) {
	attrs := []any{"publisher", msg.Publisher, "offset", msg.Offset, "delivery", msg.Delivery, "err", err}
	// By this member's --max-deliver and --backoff: the group's are those
	// of the member that created it (or of group configure), the same when
	// the members agree.
	if g.maxDeliver > 0 && int(msg.Delivery) >= g.maxDeliver {
		log.Warn("command failed: the record goes to the dead-letter stream", append(attrs, "max_deliver", g.maxDeliver)...)
		return
	}
	i := min(int(msg.Delivery), len(g.backoff)) - 1
	log.Warn("command failed: the record is redelivered", append(attrs, "after", g.backoff[max(i, 0)])...)
}

// groupConsumeAliasCmd is `fastmq group consume`, the earlier spelling of
// `fastmq consume --group`, kept as a hidden alias.
func groupConsumeAliasCmd() *cobra.Command {
	var nf nodeFlags
	var g groupConsume
	var stream string
	var from spool.Start
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
			if err := g.check(); err != nil {
				return err
			}
			if nf.name == "" {
				nf.name = hostnameOr("member") + "-" + g.group + fmt.Sprintf("-%d", os.Getpid())
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				return g.run(ctx, n, stream, nf.join, from, count, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	nf.register(cmd, "node-name", "")
	g.register(cmd)
	cmd.Flags().StringVar(&stream, "stream", "", "stream to consume (required)")
	cmd.Flags().TextVar(&from, "from", spool.Earliest(), "where a new group starts: earliest, latest, OFFSET or RFC3339 time")
	cmd.Flags().Uint64Var(&count, "count", 0, "exit after N records processed (0 = run until SIGINT)")
	return cmd
}
