package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
	"github.com/fastmq/fastmq/patterns/group"
)

func init() {
	dlq := &cobra.Command{
		Use:   "dlq",
		Short: "A consumer group's dead letters: list them, replay them into their stream",
		Long: "A record a group's members naked or let run out --max-deliver times, or terminated, is " +
			"appended on its publisher to the ordinary stream STREAM.GROUP.dlq, with its headers and " +
			"fastmq-dlq-stream, -offset, -group, -deliveries and -reason.",
	}
	dlq.AddCommand(dlqLsCmd(), dlqReplayCmd())
	rootCmd.AddCommand(dlq)
}

func dlqLsCmd() *cobra.Command {
	var a adminFlags
	var stream, name, only string
	var from uint64
	var limit int
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the dead letters of a consumer group on every publisher of its stream",
		Long: "Prints, per publisher of --stream, the group's dead letters from --from (an offset of the " +
			"dead-letter stream): the offset in the dead-letter stream, the record's offset in STREAM, its " +
			"deliveries, the reason, its own headers, its value (abridged), its failed deliveries " +
			"(DELIVERY:OUTCOME: nak, expired, term, member-gone, member-left) and the handler's last reason " +
			"(a nak's or term's text: the error of a --exec command or handler). --json prints each dead " +
			"letter whole, in the record shape of every --json (publisher, the dead-letter stream, its " +
			"offset there, every header and the value; no id).",
		Example: "  fastmq dlq ls --join 127.0.0.1:7946 --stream orders --group billing",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			if limit <= 0 {
				return fmt.Errorf("--limit %d: want at least 1", limit)
			}
			return a.run(cmd, "dlq-ls", only, 10*time.Second, func(ctx context.Context, adm *group.Admin) error {
				res, err := adm.DeadLetters(ctx, stream, name, from, limit)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				enc := records.NewEncoder(out)
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				if !a.asJSON {
					fmt.Fprintln(tw, "PUBLISHER\tDLQ OFFSET\tOFFSET\tDELIVERIES\tREASON\tHEADERS\tVALUE\tHISTORY\tLAST REASON")
				}
				known := false // the group is known to a publisher
				for _, r := range res {
					p := r.Publisher.Name
					// What a publisher that failed midway sent comes
					// before its error.
					for _, rec := range r.Value {
						if a.asJSON {
							// The one record shape of every --json, value and
							// headers whole (the table below abridges them).
							if err := enc.Encode(p, group.DLQStream(stream, name), rec.Offset, uuid.Nil, rec.Time, rec.Headers, rec.Value); err != nil {
								return err
							}
							continue
						}
						printDeadLetter(tw, p, rec)
					}
					switch {
					case r.Err == nil || errors.Is(r.Err, group.ErrNoDeadLetters):
						known = true
					case unknownThere(r.Err):
					default:
						tw.Flush() // the rows of the publishers before it
						return fmt.Errorf("publisher %s: %w", p, r.Err)
					}
				}
				if !known {
					// An empty list would say the group has no dead
					// letters: say it has none because it is unknown.
					return unknownGroup(stream, name, only)
				}
				if a.asJSON {
					return nil
				}
				return tw.Flush()
			})
		},
	}
	a.register(cmd, "one dead letter per line")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	cmd.Flags().StringVar(&only, "publisher", "", "only on this publisher (node name)")
	cmd.Flags().Uint64Var(&from, "from", 0, "first offset of the dead-letter stream to list")
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many dead letters per publisher")
	return cmd
}

// printDeadLetter writes a dead letter's row of dlq ls.
func printDeadLetter(tw io.Writer, publisher string, r group.Record) {
	hs := map[string]string{}
	var own []string
	for _, h := range r.Headers {
		hs[h.Key] = string(h.Value)
		if !strings.HasPrefix(h.Key, "fastmq-dlq-") {
			own = append(own, h.Key+"="+string(h.Value))
		}
	}
	fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", publisher, r.Offset, hs[group.HeaderDLQOffset],
		hs[group.HeaderDLQDeliveries], orDash(hs[group.HeaderDLQReason]), orDash(strings.Join(own, " ")), printable(r.Value),
		orDash(historyOf(hs[group.HeaderDLQHistory])), orDash(printable([]byte(hs[group.HeaderDLQLastReason]))))
}

// historyOf abridges a dead letter's delivery history (HeaderDLQHistory)
// to DELIVERY:OUTCOME,... ("1:nak,2:expired"); --json shows it whole.
func historyOf(h string) string {
	if h == "" {
		return ""
	}
	var hist []struct {
		Delivery uint32 `json:"delivery"`
		Outcome  string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(h), &hist); err != nil {
		return "?"
	}
	parts := make([]string, len(hist))
	for i, a := range hist {
		parts[i] = fmt.Sprintf("%d:%s", a.Delivery, strings.ReplaceAll(a.Outcome, " ", "-"))
	}
	return strings.Join(parts, ",")
}

// unknownThere tells a publisher's answer that it does not know the group.
func unknownThere(err error) bool {
	var se *group.StatusError
	return errors.As(err, &se) && se.Status == group.StatusUnknown
}

// unknownGroup is the error for a group that no publisher asked (only,
// when set, the one asked) knows.
func unknownGroup(stream, name, only string) error {
	if only != "" {
		return fmt.Errorf("publisher %s does not know group %s of stream %s", only, name, stream)
	}
	return fmt.Errorf("no publisher of stream %s knows group %s", stream, name)
}

// printable is a value as text when it is UTF-8 (up to 200 bytes), else
// its size.
func printable(v []byte) string {
	if !utf8.Valid(v) {
		return fmt.Sprintf("(%d bytes, binary)", len(v))
	}
	if len(v) > 200 {
		return string(v[:200]) + "…"
	}
	return string(v)
}

func dlqReplayCmd() *cobra.Command {
	var a adminFlags
	var stream, name, only string
	var from uint64
	var count uint32
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Give a group's dead letters back to that group, on each publisher",
		Long: "On every publisher of --stream (or only --publisher), gives the group's dead letters at " +
			"offsets [--from, --from+--count) of its dead-letter stream (--count 0: to its end) back to " +
			"--group: their records are made pending again in the group's state, at their own offsets, " +
			"with their own id and headers, and delivered to it again; no other group of the stream sees " +
			"them. The publisher writes the replayed records and which dead letters it replayed at once, " +
			"before it answers: a second replay of the same range (or one asked again after a crash) " +
			"replays nothing and says how many it skipped. Records retention removed from the stream " +
			"cannot be replayed and are counted as gone.",
		Example: "  fastmq dlq replay --join 127.0.0.1:7946 --stream orders --group billing\n" +
			"  fastmq dlq replay --join 127.0.0.1:7946 --stream orders --group billing --publisher web-1 --from 10 --count 5",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			return a.run(cmd, "dlq-replay", only, 2*time.Minute, func(ctx context.Context, adm *group.Admin) error {
				res, err := adm.Replay(ctx, stream, name, from, count)
				if err != nil {
					return err
				}
				type line struct {
					Publisher string `json:"publisher"`
					group.ReplayResult
					Error string `json:"error,omitempty"`
				}
				var lines []line
				failed, unknown := 0, 0
				for _, r := range res {
					l := line{Publisher: r.Publisher.Name}
					switch {
					case errors.Is(r.Err, group.ErrNoDeadLetters):
						l.Error = "no dead letters"
					case unknownThere(r.Err):
						unknown++
						l.Error = "no dead letters: " + r.Err.Error()
					case r.Err != nil:
						failed++
						l.Error = r.Err.Error()
					default:
						l.ReplayResult = r.Value
					}
					lines = append(lines, l)
				}
				out := cmd.OutOrStdout()
				if a.asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(lines); err != nil {
						return err
					}
				} else {
					for _, l := range lines {
						switch {
						case l.Error != "":
							fmt.Fprintf(out, "%s: %s\n", l.Publisher, l.Error)
						default:
							fmt.Fprintf(out, "%s: replayed %d dead letters [%d, %d) to group %s (their records, at their own offsets); skipped %d (replayed before or pending)",
								l.Publisher, l.Replayed, l.From, l.To, name, l.Skipped)
							if l.Gone > 0 {
								fmt.Fprintf(out, "; %d gone from the stream (retention)", l.Gone)
							}
							fmt.Fprintln(out)
						}
					}
				}
				if failed > 0 {
					return fmt.Errorf("the replay failed on %d of %d publishers", failed, len(res))
				}
				if unknown == len(res) {
					return unknownGroup(stream, name, only)
				}
				return nil
			})
		},
	}
	a.register(cmd, "the results")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	cmd.Flags().StringVar(&only, "publisher", "", "only on this publisher (node name)")
	cmd.Flags().Uint64Var(&from, "from", 0, "first offset of the dead-letter stream to replay")
	cmd.Flags().Uint32Var(&count, "count", 0, "how many dead letters from --from (0: to the end)")
	return cmd
}
