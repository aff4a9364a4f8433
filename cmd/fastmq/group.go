package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

func init() {
	grp := &cobra.Command{
		Use:   "group",
		Short: "Consumer groups: list them, show one, move its cursor (members run with fastmq consume --group)",
		Long: "The members of a consumer group share a stream's records, each record to one of them; every " +
			"group gets every record. Members run with `fastmq consume --stream S --group G`. Each publisher " +
			"keeps the state of the groups of its own records: these commands join the mesh, ask every " +
			"publisher, and print one row per group and publisher.",
	}
	grp.AddCommand(groupConsumeAliasCmd(), groupLsCmd(), groupInfoCmd(), groupSeekCmd(), groupConfigureCmd(), groupRepairCmd())
	rootCmd.AddCommand(grp)
}

// adminTimeout bounds a group command's request to one publisher.
const adminTimeout = 5 * time.Second

// adminFlags are the flags of the commands that join the mesh to ask
// publishers about groups: an observer's (see adminObserver), no data
// directory, no spool.
type adminFlags struct {
	obs    observerFlags
	wait   time.Duration
	asJSON bool
}

func (a *adminFlags) register(cmd *cobra.Command, what string) {
	a.obs.register(cmd)
	cmd.Flags().DurationVar(&a.wait, "wait", 5*time.Second, "how long to wait for gossip to find the publishers")
	cmd.Flags().BoolVar(&a.asJSON, "json", false, "print "+what+" as JSON")
}

// run joins the mesh as a short-lived observer (role names it) and calls
// fn with an Admin that finds the publishers by gossip (publishersOf:
// only the one named only, when it is set) and gives each request to a
// publisher timeout.
func (a *adminFlags) run(cmd *cobra.Command, role, only string, timeout time.Duration, fn func(ctx context.Context, adm *group.Admin) error) error {
	return a.obs.run(cmd.Context(), role, func(ctx context.Context, m *discovery.Membership, sock socket.Config) error {
		var refused []error // publishers the observer cannot connect to securely
		adm, err := group.NewAdmin(group.AdminConfig{
			Publishers: func(ctx context.Context, stream string) ([]group.Publisher, error) {
				pubs, err := publishersOf(ctx, m, stream, only, a.wait)
				if err != nil {
					return nil, err
				}
				var ok []group.Publisher
				ok, refused = secureOnly(sock, pubs)
				if len(ok) == 0 {
					return nil, errors.Join(refused...)
				}
				return ok, nil
			},
			Socket:  sock,
			Timeout: timeout,
		})
		if err != nil {
			return err
		}
		if err := fn(ctx, adm); err != nil {
			return err
		}
		return errors.Join(refused...)
	})
}

// secureOnly returns the publishers a socket of cfg can connect to, and
// why it cannot connect to the others (fastmq.ErrMixedMesh: a node without
// --curve-key in a CURVE mesh, say), which would otherwise end in a
// timeout.
func secureOnly(cfg socket.Config, pubs []group.Publisher) (ok []group.Publisher, refused []error) {
	for _, p := range pubs {
		if cfg.CurveServerKeyFor != nil {
			if _, err := cfg.CurveServerKeyFor(p.Endpoint); err != nil {
				refused = append(refused, fmt.Errorf("publisher %s: %w", p.Name, err))
				continue
			}
		}
		ok = append(ok, p)
	}
	return ok, refused
}

// publishersOf waits up to wait for gossip to name publishers: of stream,
// or of any stream when stream is "" or group.AllStreams; only the one
// named only when it is set. Sorted by node name.
func publishersOf(ctx context.Context, n *discovery.Membership, stream, only string, wait time.Duration) ([]group.Publisher, error) {
	if stream == group.AllStreams {
		stream = ""
	}
	find := func() []group.Publisher {
		var out []group.Publisher
		if stream != "" {
			for _, in := range n.LookupStream(stream) {
				if len(in.Service.Endpoints) > 0 && in.Node != n.Name() && (only == "" || in.Node == only) {
					out = append(out, group.Publisher{Name: in.Node, Endpoint: in.Service.Endpoints[0]})
				}
			}
		} else {
			for _, m := range n.Members() {
				if m.Status == discovery.StatusAlive && m.Spool != nil && len(m.Spool.Streams) > 0 && m.Name != n.Name() &&
					(only == "" || m.Name == only) {
					out = append(out, group.Publisher{Name: m.Name, Endpoint: m.Spool.Endpoint})
				}
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	// Gossip tells the publishers one by one as the join completes: take
	// the list once it is not empty and has not changed for three looks
	// in a row (or the wait is over).
	deadline := time.Now().Add(wait)
	pubs := find()
	for same := 0; (len(pubs) == 0 || same < 3) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		again := find()
		if len(again) == len(pubs) && len(pubs) > 0 {
			same++
		} else {
			same = 0
		}
		pubs = again
	}
	if len(pubs) == 0 {
		what := "no publisher"
		if stream != "" {
			what = fmt.Sprintf("no publisher of %q", stream)
		}
		if only != "" {
			what += " named " + only
		}
		return nil, errors.New(what + " found")
	}
	return pubs, nil
}

// groupRow is one group on one publisher, as ls, info and seek print it.
type groupRow struct {
	Publisher string `json:"publisher"`
	group.GroupStats
	Error string `json:"error,omitempty"`
}

// groupRows returns the rows of an Admin's results (stats gives the
// groups of one publisher's answer), sorted by stream, group and
// publisher.
func groupRows[T any](res []group.Result[T], stats func(T) []group.GroupStats) []groupRow {
	var rows []groupRow
	for _, r := range res {
		if r.Err != nil {
			rows = append(rows, groupRow{Publisher: r.Publisher.Name, Error: r.Err.Error()})
			continue
		}
		for _, st := range stats(r.Value) {
			rows = append(rows, groupRow{Publisher: r.Publisher.Name, GroupStats: st})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Publisher < b.Publisher
	})
	return rows
}

// statsOne is groupRows' stats for an answer of one group.
func statsOne(st group.GroupStats) []group.GroupStats { return []group.GroupStats{st} }

// statsAll is groupRows' stats for an answer of several groups.
func statsAll(sts []group.GroupStats) []group.GroupStats { return sts }

// failedOn returns an error if a publisher answered what with an error
// (its row, printed, says which): a non-zero exit.
func failedOn[T any](what string, res []group.Result[T]) error {
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s failed on %d of %d publishers", what, failed, len(res))
	}
	return nil
}

// printGroupRows writes rows as a table, or as JSON.
func printGroupRows(w io.Writer, rows []groupRow, asJSON bool) error {
	if asJSON {
		if rows == nil {
			rows = []groupRow{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tGROUP\tPUBLISHER\tFLOOR\tCURSOR\tEND\tLAG\tLAG TIME\tPENDING\tIN FLIGHT\tMEMBERS\tDELIVERED\tREDELIVERED\tACKED\tNAKED\tEXPIRED\tDEAD LETTERS")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "-\t-\t%s\t%s\n", r.Publisher, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Stream, r.Group, r.Publisher,
			r.Floor, r.Next, r.High, r.Lag, durOr(r.LagTime), r.Pending, r.InFlight, r.Active,
			r.Delivered, r.Redelivered, r.Acked, r.Naked, r.Expired, r.DeadLettered)
	}
	return tw.Flush()
}

// groupLsCmd is `fastmq group ls`: every group of every publisher.
func groupLsCmd() *cobra.Command {
	var a adminFlags
	var stream string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List every consumer group of every publisher in the mesh",
		Long: "Joins the mesh, asks every publisher (every node that serves a stream) for the groups it keeps " +
			"state for, and prints one row per group and publisher: FLOOR (every record below is settled), " +
			"CURSOR (the first record never delivered), END (the stream's next offset), LAG (records not " +
			"settled) and LAG TIME (the oldest one's age), PENDING (in flight or waiting for a redelivery), " +
			"IN FLIGHT (leased to a member), MEMBERS (live: holding leases or waiting in a fetch), the counters since the publisher " +
			"started (DELIVERED, REDELIVERED, ACKED, NAKED, EXPIRED) and DEAD LETTERS (records in the group's " +
			"dead-letter stream there).",
		Example: "  fastmq group ls --join 127.0.0.1:7946",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.run(cmd, "group-ls", "", adminTimeout, func(ctx context.Context, adm *group.Admin) error {
				which := group.AllStreams
				if stream != "" {
					which = stream
				}
				res, err := adm.List(ctx, which)
				if err != nil {
					return err
				}
				if err := printGroupRows(cmd.OutOrStdout(), groupRows(res, statsAll), a.asJSON); err != nil {
					return err
				}
				return failedOn("the query", res)
			})
		},
	}
	a.register(cmd, "the rows")
	cmd.Flags().StringVar(&stream, "stream", "", "only the groups of this stream")
	return cmd
}

// groupInfoCmd is `fastmq group info`: one group on every publisher of
// its stream.
func groupInfoCmd() *cobra.Command {
	var a adminFlags
	var stream, name string
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show a consumer group's state on every publisher of its stream",
		Long:  "Joins the mesh, finds the publishers of --stream and prints the group's row for each (columns as in fastmq group ls).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			return a.run(cmd, "group-info", "", adminTimeout, func(ctx context.Context, adm *group.Admin) error {
				res, err := adm.Info(ctx, stream, name)
				if err != nil {
					return err
				}
				if err := printGroupRows(cmd.OutOrStdout(), groupRows(res, statsOne), a.asJSON); err != nil {
					return err
				}
				return failedOn("the query", res)
			})
		},
	}
	a.register(cmd, "the rows")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	return cmd
}

// groupSeekCmd is `fastmq group seek`: move a group's cursor on each
// publisher.
func groupSeekCmd() *cobra.Command {
	var a adminFlags
	var stream, name, to, only string
	cmd := &cobra.Command{
		Use:   "seek",
		Short: "Move a consumer group's cursor on each publisher of its stream",
		Long: "Moves the cursor of --group on every publisher of --stream (or only on --publisher) to --to: " +
			"earliest, latest, an offset (each publisher has offsets of its own: use --publisher) or an " +
			"RFC 3339 time. On each publisher the group's leases and pending redeliveries are dropped (a " +
			"member's later ack of one is refused), the records before the position count as settled " +
			"(skipped, not dead-lettered) and those from it on are delivered again. Prints the group's rows " +
			"after the move.",
		Example: "  fastmq group seek --join 127.0.0.1:7946 --stream orders --group billing --to 2026-01-02T15:04:05Z\n" +
			"  fastmq group seek --join 127.0.0.1:7946 --stream orders --group billing --to 1200 --publisher web-1",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" || to == "" {
				return errors.New("--stream, --group and --to are required")
			}
			pos, err := spool.ParseStart(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			return a.run(cmd, "group-seek", only, adminTimeout, func(ctx context.Context, adm *group.Admin) error {
				res, err := adm.Seek(ctx, stream, name, pos)
				if err != nil {
					return err
				}
				if err := printGroupRows(cmd.OutOrStdout(), groupRows(res, statsOne), a.asJSON); err != nil {
					return err
				}
				return failedOn("the seek", res)
			})
		},
	}
	a.register(cmd, "the rows after the move")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	cmd.Flags().StringVar(&to, "to", "", "earliest, latest, OFFSET or RFC3339 time (required)")
	cmd.Flags().StringVar(&only, "publisher", "", "only on this publisher (node name)")
	return cmd
}

// groupConfigureCmd is `fastmq group configure`: set a group's AckWait,
// MaxDeliver and Backoff on each publisher, the only way they change once
// the group exists (a member's fetch sets them only when it creates it).
func groupConfigureCmd() *cobra.Command {
	var a adminFlags
	var stream, name, only string
	var set group.Settings
	cmd := &cobra.Command{
		Use:   "configure",
		Short: "Set a consumer group's lease length, delivery limit and backoff on each publisher of its stream",
		Long: "Sets the settings of --group on every publisher of --stream (or only on --publisher): the lease " +
			"length (--ack-wait, held to 100ms..1h), the deliveries before a dead letter (--max-deliver, -1 " +
			"unlimited) and the redelivery backoff. A group takes the settings of the member whose fetch " +
			"created it; members joining later do not change them, only this command does. Prints the " +
			"group's rows after the change.",
		Example: "  fastmq group configure --join 127.0.0.1:7946 --stream orders --group billing --ack-wait 1m --max-deliver 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" || name == "" {
				return errors.New("--stream and --group are required")
			}
			if set.AckWait < 0 || set.AckWait > group.MaxAckWait {
				return fmt.Errorf("--ack-wait %v: want 0 (the default) to %v", set.AckWait, group.MaxAckWait)
			}
			return a.run(cmd, "group-configure", only, adminTimeout, func(ctx context.Context, adm *group.Admin) error {
				res, err := adm.Configure(ctx, stream, name, set)
				if err != nil {
					return err
				}
				if err := printGroupRows(cmd.OutOrStdout(), groupRows(res, statsOne), a.asJSON); err != nil {
					return err
				}
				return failedOn("the change", res)
			})
		},
	}
	a.register(cmd, "the rows after the change")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	cmd.Flags().DurationVar(&set.AckWait, "ack-wait", group.DefaultAckWait, "lease length: a record not acknowledged within it is redelivered")
	cmd.Flags().IntVar(&set.MaxDeliver, "max-deliver", group.DefaultMaxDeliver, "deliveries before a record goes to the dead-letter stream; -1 unlimited")
	cmd.Flags().DurationSliceVar(&set.Backoff, "backoff", nil, "redelivery delays after the 1st, 2nd, ... failed delivery (the last repeats)")
	cmd.Flags().StringVar(&only, "publisher", "", "only on this publisher (node name)")
	return cmd
}

// groupRepairCmd is `fastmq group repair`: rebuild a group's damaged
// state on this node's disk, the publisher stopped.
func groupRepairCmd() *cobra.Command {
	var data, stream, name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Rebuild a consumer group's damaged state on this publisher's disk (stop the publisher first)",
		Long: "A publisher whose group state is damaged (a zeroed or cut journal, an empty or flipped state file) " +
			"logs it at ERROR and answers the group's members with an error until it is repaired. Run this " +
			"with the publisher stopped, on its --data: the damaged files are moved to " +
			"DATA/groups/STREAM/quarantine/, the state is rebuilt from the snapshot and the journal entries " +
			"before the damage, and what was lost is printed (the records the lost entries had settled are " +
			"delivered again). Without a valid snapshot nothing is left: the group then waits for " +
			"`fastmq group seek`, as does a group whose state vanished.",
		Example: "  fastmq group repair --data /var/lib/fastmq --stream orders --group billing",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" || stream == "" || name == "" {
				return errors.New("--data, --stream and --group are required")
			}
			rep, err := group.Repair(filepath.Join(data, "groups"), stream, name)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(rep)
			}
			if rep.Damage == "" {
				fmt.Fprintf(w, "group %s of stream %s: state reads clean, nothing to repair\n", name, stream)
				return nil
			}
			fmt.Fprintf(w, "damage: %s\n", rep.Damage)
			for _, q := range rep.Quarantined {
				fmt.Fprintf(w, "quarantined: %s\n", q)
			}
			if rep.Kept {
				fmt.Fprintf(w, "rebuilt: floor %d, cursor %d, from the snapshot and %d journal entries\n", rep.Floor, rep.Next, rep.Entries)
			}
			fmt.Fprintf(w, "lost: %s\n", rep.Lost)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the publisher's data directory (required)")
	cmd.Flags().StringVar(&stream, "stream", "", "stream (required)")
	cmd.Flags().StringVar(&name, "group", "", "consumer group (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
