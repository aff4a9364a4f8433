package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

var newline = []byte{'\n'}

func init() {
	var nf nodeFlags
	var stream, name string
	var from spool.Start
	var count uint64
	var asJSON bool
	var grp groupConsume
	consume := &cobra.Command{
		Use:   "consume --stream S (--name N | --group G)",
		Short: "Pull a stream from every publisher in the mesh and print its records (or process them as a consumer group's member)",
		Long: "Pulls --stream from every publisher in the mesh and prints each record's value on its own line. " +
			"With --name, the consumer gets every record and keeps its own offsets (topic semantics: each name " +
			"gets every record).\n\n" + groupConsumeHelp + "\n\n" +
			records.JSONHelp + "\nconsume puts \"publisher\" and \"stream\" first; the rest of the line is what " +
			"`fastmq spool read --json` prints for the same record.",
		Example: "  fastmq consume --join 127.0.0.1:7946 --data ./c --stream orders --name audit\n" +
			"  fastmq consume --join 127.0.0.1:7946 --data ./w1 --stream orders --group billing --exec ./bill.sh",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return errors.New("--stream is required")
			}
			if grp.group != "" {
				if name != "" || asJSON {
					return errors.New("--group excludes --name and --json")
				}
				if err := grp.check(); err != nil {
					return err
				}
				if nf.name == "" {
					nf.name = hostnameOr("member") + "-" + grp.group + fmt.Sprintf("-%d", os.Getpid())
				}
				return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
					return grp.run(ctx, n, stream, nf.join, from, count, cmd.OutOrStdout(), cmd.ErrOrStderr())
				})
			}
			for _, f := range []string{"exec", "ack-wait", "max-deliver", "backoff", "concurrency", "ordered"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s needs --group", f)
				}
			}
			if name == "" {
				return errors.New("--name (a consumer's name) or --group (a consumer group's) is required")
			}
			if nf.name == "" {
				nf.name = hostnameOr("consumer") + "-" + name
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				// A permanent refusal (a wrong gossip key, a mixed CURVE
				// mesh) ends the command with its error.
				ctx, stop := context.WithCancel(ctx)
				defer stop()
				var ref refusals
				ref.watch(ctx, n, stream, nf.join, stop)
				c, err := n.Consume(fastmq.ConsumerConfig{Stream: stream, Name: name, Pull: pull.ConsumerConfig{Start: from}})
				if err != nil {
					return err
				}
				defer c.Close()
				// Records are acknowledged only once their lines reached
				// the output (written whole, see records.LineWriter): a
				// kill at any moment loses nothing, and prints at most the
				// unacknowledged lines again after a restart.
				if f, ok := cmd.OutOrStdout().(*os.File); ok {
					if finishCutLine(f) {
						n.Logger().Warn("the output file ended in a cut line (a kill while writing): ended it with a newline")
					}
				}
				out := records.NewLineWriter(cmd.OutOrStdout())
				enc := records.NewEncoder(out)
				var pending []pull.Message
				flush := func() error {
					if err := out.Flush(); err != nil {
						return err
					}
					for _, m := range pending {
						c.Ack(m)
					}
					pending = pending[:0]
					return nil
				}
				var got uint64
				for count == 0 || got < count {
					wctx := ctx
					cancel := func() {}
					if out.Buffered() > 0 {
						// Flush when nothing more is ready right now.
						wctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
					}
					m, err := c.Next(wctx)
					cancel()
					if err != nil {
						if ctx.Err() != nil {
							break
						}
						if errors.Is(err, context.DeadlineExceeded) {
							if err := flush(); err != nil {
								return err
							}
							continue
						}
						// A publisher stopped for good (damage, a
						// protocol error): what was delivered is printed
						// and acknowledged, then the command fails.
						if ferr := flush(); ferr != nil {
							return ferr
						}
						return err
					}
					if asJSON {
						if err := enc.Encode(m.Publisher, m.Stream, m.Offset, m.ID, m.Time, m.Headers, m.Value); err != nil {
							return err
						}
					} else {
						out.Write(m.Value)
						out.Write(newline)
					}
					pending = append(pending, m)
					got++
					if out.Buffered() >= 64<<10 {
						if err := flush(); err != nil {
							return err
						}
					}
				}
				if err := flush(); err != nil {
					return err
				}
				if err := ref.Err(); err != nil {
					return err
				}
				if err := c.Err(); err != nil {
					return err
				}
				return c.Close()
			})
		},
	}
	nf.register(consume, "node-name", "")
	consume.Flags().StringVar(&stream, "stream", "", "stream to consume (required)")
	consume.Flags().StringVar(&name, "name", "", "consumer name; each name gets every record and keeps its own offsets")
	consume.Flags().TextVar(&from, "from", spool.Earliest(), "start without a committed offset (a new group's cursor with --group): earliest, latest, OFFSET or RFC3339 time")
	consume.Flags().Uint64Var(&count, "count", 0, "exit after N records (processed, with --group) (0 = run until SIGINT)")
	grp.register(consume)
	consume.Flags().BoolVar(&asJSON, "json", false, "print full records as JSON lines (shape in the help above)")
	rootCmd.AddCommand(consume)
}

// finishCutLine ends with a newline a regular file f (the output, opened
// for appending) whose last line was cut: a kill can interrupt a write to
// a file between two pages, leaving part of a line whose record was not
// acknowledged. Without the newline, the record printed again by this run
// would be glued to that part and read as garbage. It reports whether it
// wrote one; an output it cannot read back (not a regular file, no
// /proc) is left as it is.
func finishCutLine(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return false
	}
	// Only a file opened for appending is written at its end.
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		return false
	}
	_, flags, _ := strings.Cut(string(info), "flags:")
	flags, _, _ = strings.Cut(strings.TrimSpace(flags), "\n")
	if fl, err := strconv.ParseUint(flags, 8, 64); err != nil || fl&syscall.O_APPEND == 0 {
		return false
	}
	r, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return false
	}
	defer r.Close()
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, st.Size()-1); err != nil || last[0] == '\n' {
		return false
	}
	_, err = f.Write(newline)
	return err == nil
}
