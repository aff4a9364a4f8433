package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/discovery"
)

// meshView asks the agent serving HTTP at addr for the mesh as its console
// gathers it.
func meshView(ctx context.Context, client *http.Client, addr string) (console.View, error) {
	ctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	return console.FetchView(ctx, client, addr)
}

// tokenClient is the HTTP client of --token-file: one that presents the
// file's token (nil, the default client, without the flag).
func tokenClient(file string) (*http.Client, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return console.TokenClient(nil, strings.TrimSpace(string(b))), nil
}

func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return strconv.FormatUint(b, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func rateOr(m map[string]float64, k string) string {
	r, ok := m[k]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

func durOr(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func sub0(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// printMeshReport writes the mesh-wide tables of members, streams (one row
// per publisher) and consumers with their lag per publisher.
func printMeshReport(w io.Writer, v console.View) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MEMBER\tSTATUS\tGOSSIP\tHTTP\tSTREAMS\tDISK FREE\tNOTE\n")
	for _, m := range v.Mesh.Members {
		status, disk, note := m.Status, "-", ""
		if m.Missing {
			status = "missing"
		} else if m.Down && m.Status == "alive" {
			status = "down"
		}
		if m.Down || m.NoHTTP {
			note = m.Error
		}
		if m.State != nil {
			if m.State.Disk.Error == "" {
				disk = humanBytes(m.State.Disk.FreeBytes) + " of " + humanBytes(m.State.Disk.TotalBytes)
			}
		}
		if m.Stale {
			note = "down since " + m.DownSince.UTC().Format(time.RFC3339) + "; last known state kept (fastmq members --forget " + m.Name + " drops it)"
		}
		if m.Name == v.Mesh.Node {
			note = "answered this report"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.Name, status, orDash(m.Addr), orDash(m.HTTP), len(m.Streams), disk, note)
	}
	fmt.Fprintf(tw, "\nSTREAM\tPUBLISHER\tOLDEST\tNEXT\tRECORDS\tSIZE\tAPPEND/S\tNEWEST\tRETENTION\tDISK FREE\n")
	type srow struct{ stream, node, line string }
	var srows []srow
	for _, m := range v.Mesh.Members {
		if m.State == nil {
			continue
		}
		for _, s := range m.State.Streams {
			if s.Error != "" {
				srows = append(srows, srow{s.Name, m.Name, fmt.Sprintf("%s\t%s\tnot served: %s\n", s.Name, pubName(m), s.Error)})
				continue
			}
			newest, ret := "-", "keep all"
			if !s.NewestTime.IsZero() {
				newest = s.NewestTime.UTC().Format(time.RFC3339)
			}
			var rs []string
			if s.RetentionAge > 0 {
				rs = append(rs, s.RetentionAge.String())
			}
			if s.RetentionBytes > 0 {
				rs = append(rs, humanBytes(uint64(s.RetentionBytes)))
			}
			if len(rs) > 0 {
				ret = strings.Join(rs, ", ")
			}
			free := "-"
			if m.State.Disk.Error == "" {
				free = humanBytes(m.State.Disk.FreeBytes)
			}
			srows = append(srows, srow{s.Name, m.Name, fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n",
				s.Name, pubName(m), s.Oldest, s.Next, sub0(s.Next, s.Oldest), humanBytes(uint64(max(s.Bytes, 0))),
				rateOr(v.AppendRate, m.Name+"/"+s.Name), newest, ret, free)})
		}
	}
	sort.Slice(srows, func(i, j int) bool {
		if srows[i].stream != srows[j].stream {
			return srows[i].stream < srows[j].stream
		}
		return srows[i].node < srows[j].node
	})
	for _, r := range srows {
		fmt.Fprint(tw, r.line)
	}
	fmt.Fprintf(tw, "\nCONSUMER\tNODE\tSTREAM\tPUBLISHER\tLAG\tLAG TIME\tIN FLIGHT\tACKED\tDELIVERED\tACK/S\tPULLING\n")
	for _, m := range v.Mesh.Members {
		if m.State == nil {
			continue
		}
		for _, c := range m.State.Consumers {
			for _, p := range c.Publishers {
				k := m.Name + "/" + c.Name + "/" + c.Stream + "/" + p.Publisher
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%t\n", c.Name, m.Name, c.Stream, p.Publisher,
					sub0(p.High, p.Acked), durOr(p.LagTime), sub0(p.Position, p.Acked), p.Acked, p.Delivered,
					rateOr(v.AckRate, k), p.Connected)
			}
		}
	}
	printGroupsReport(tw, v)
	printReadersReport(tw, v)
	return tw.Flush()
}

// printReadersReport writes the table of readers: who fetched from each
// publisher's spool server, as the server saw it.
func printReadersReport(tw io.Writer, v console.View) {
	fmt.Fprintf(tw, "\nPUBLISHER\tSTREAM\tREADER\tNODE\tPEER\tPOSITION\tLAG\tLAST FETCH\n")
	for _, m := range v.Mesh.Members {
		if m.State == nil {
			continue
		}
		for _, r := range m.State.Readers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", pubName(m), r.Stream, orDash(r.Consumer), orDash(r.Node), orDash(r.Peer),
				r.Position, sub0(r.High, r.Position), r.LastFetch.UTC().Format(time.RFC3339))
		}
	}
}

// printGroupsReport writes the table of consumer groups: one row per
// group and publisher.
func printGroupsReport(tw io.Writer, v console.View) {
	fmt.Fprintf(tw, "\nGROUP\tSTREAM\tPUBLISHER\tLAG\tLAG TIME\tIN FLIGHT\tREDELIVERED\tDEAD LETTERS\tDELIVER/S\tACK/S\n")
	for _, m := range v.Mesh.Members {
		if m.State == nil {
			continue
		}
		for _, g := range m.State.Groups {
			k := m.Name + "/" + g.Stream + "/" + g.Group
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", g.Group, g.Stream, pubName(m), g.Lag,
				durOr(g.LagTime), g.InFlight, g.Redelivered, g.DeadLettered, rateOr(v.GroupDeliverRate, k), rateOr(v.GroupAckRate, k))
		}
	}
}

// pubName names the publisher of a stream or group row: a down one whose
// last known state the console kept says since when it is down.
func pubName(m console.MeshMember) string {
	if !m.Stale {
		return m.Name
	}
	return m.Name + " (publisher down since " + m.DownSince.UTC().Format(time.RFC3339) + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func init() {
	var f gossipFlags
	var asJSON bool
	var httpAddr, tokenFile string
	cmd := &cobra.Command{
		Use:   "status (--join HOST:PORT | --http HOST:PORT)",
		Short: "Print the mesh-wide tables of members, streams, consumer lag and consumer groups",
		Long: "Ask a running agent's console (fastmq agent --http) for the mesh as it gathers it, " +
			"and print three tables: the members (status, gossip and HTTP addresses, disk free), " +
			"the streams (one row per publisher: oldest and next offset, size, append rate, " +
			"retention, disk free on that host) and the consumers (lag per publisher in records " +
			"and time, records in flight, acknowledged and delivered). LAG is the publisher's " +
			"next offset minus the consumer's acknowledged one. A fourth table lists the consumer " +
			"groups, one row per group and publisher: records not settled (LAG) and the oldest one's " +
			"age, leases in flight, redeliveries, records in the dead-letter stream, and rates. " +
			"A fifth lists the readers each publisher's spool server saw lately (consumer, node, " +
			"address, the position of its last fetch, its lag then, when), plain consumers included. " +
			"With --join, join the mesh as a " +
			"short-lived observer to find an agent that serves HTTP, then leave. Rates need two " +
			"gatherings by the agent: '-' on the first.",
		Example: "  fastmq status --join 127.0.0.1:7946\n  fastmq status --http 127.0.0.1:8080 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			client, err := tokenClient(tokenFile)
			if err != nil {
				return err
			}
			report := func(addr string) error {
				v, err := meshView(ctx, client, addr)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					return enc.Encode(v)
				}
				return printMeshReport(out, v)
			}
			if httpAddr != "" {
				if len(f.join) > 0 {
					return fmt.Errorf("--http and --join exclude each other")
				}
				return report(httpAddr)
			}
			if len(f.join) == 0 {
				return fmt.Errorf("--join or --http is required")
			}
			return withObserver(ctx, f, "status", func(m *discovery.Membership) error {
				addr := agentHTTP(m, f.join)
				if addr == "" {
					return fmt.Errorf("no agent in the mesh serves HTTP: start one with fastmq agent --http HOST:PORT")
				}
				return report(addr)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.join, "join", nil, "gossip address of a mesh node (repeatable)")
	fl.StringVar(&f.bind, "gossip", "", "bind address of the observer (default HOST:0 next to --join)")
	fl.StringVar(&httpAddr, "http", "", "HTTP address of an agent (its --http) to ask, instead of joining the mesh")
	fl.BoolVar(&asJSON, "json", false, "print the gathered mesh as JSON")
	fl.StringVar(&tokenFile, "token-file", "", "`FILE` holding a bearer token for the agent's HTTP (its --http-tokens): what its ACL lets the token's client read is shown")
	f.registerKey(cmd)
	rootCmd.AddCommand(cmd)
}
