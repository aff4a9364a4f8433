package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/discovery"
)

// membersPollInterval is how often --watch compares the member list.
const membersPollInterval = 500 * time.Millisecond

// formatMember renders one member on one line:
// name addr status services... [spool endpoint streams]
func formatMember(m discovery.Member) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s\t%s", m.Name, m.Addr, m.Status)
	for _, s := range m.Services {
		fmt.Fprintf(&b, "\t%s/%s=%s", s.Name, s.Kind, strings.Join(s.Endpoints, ","))
	}
	if m.Spool != nil {
		fmt.Fprintf(&b, "\tspool=%s[%s]", m.Spool.Endpoint, strings.Join(m.Spool.Streams, ","))
	}
	if m.RTT > 0 {
		fmt.Fprintf(&b, "\trtt=%s", m.RTT.Round(10*time.Microsecond))
	}
	return b.String()
}

// observerTag marks the short-lived nodes of "fastmq members", so that the
// command does not list its own or earlier runs' observers.
const observerTag = "fastmq-observer"

// memberLines lists the mesh without observers, keyed by name.
// RTT is left out so that --watch reports changes of state only.
func memberLines(m *discovery.Membership) map[string]string {
	out := map[string]string{}
	for _, mem := range m.Members() {
		if mem.Name == m.Name() || mem.Tags[observerTag] != "" {
			continue
		}
		mem.RTT = 0
		out[mem.Name] = formatMember(mem)
	}
	return out
}

func printMembers(w io.Writer, lines map[string]string) {
	names := make([]string, 0, len(lines))
	for n := range lines {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintln(w, lines[n])
	}
}

// runMembers joins the mesh as a short-lived observer, prints the members
// and, with watch, keeps printing changes until ctx ends. It always leaves
// gracefully.
func runMembers(ctx context.Context, cfg discovery.Config, watch bool, w io.Writer) error {
	m, err := discovery.New(cfg)
	if err != nil {
		return err
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.Background(), gossipLeaveTimeout)
		defer cancel()
		m.Leave(lctx)
	}()
	prev := memberLines(m)
	printMembers(w, prev)
	if !watch {
		return nil
	}
	t := time.NewTicker(membersPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur := memberLines(m)
		changed := map[string]string{}
		for n, l := range cur {
			if prev[n] != l {
				changed[n] = l
			}
		}
		for n := range prev {
			if _, ok := cur[n]; !ok {
				changed[n] = n + "\t-\treaped"
			}
		}
		if len(changed) > 0 {
			fmt.Fprintf(w, "# %s\n", time.Now().UTC().Format(time.RFC3339))
			printMembers(w, changed)
		}
		prev = cur
	}
}

func init() {
	var f gossipFlags
	var watch bool
	cmd := &cobra.Command{
		Use:   "members --join HOST:PORT",
		Short: "Print the gossip mesh, one member a line: name, address, status, services",
		Long: "Join the mesh as a short-lived observer node, print every member " +
			"(name, gossip address, status alive/leaving/left/failed, advertised services " +
			"and spool), then leave. With --watch keep printing members whose state " +
			"changes until SIGINT/SIGTERM. Observers (this command's own nodes, tagged " +
			observerTag + ") are not listed; they stay in serf's member lists as left " +
			"until its tombstone timeout.",
		Example: "  fastmq members --join 127.0.0.1:7946\n  fastmq members --join 10.0.0.5:7946 --key $KEY --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.join) == 0 {
				return fmt.Errorf("--join is required")
			}
			if f.bind == "" {
				f.bind = observerBind(f.join[0])
			}
			f.name = fmt.Sprintf("members-%s-%d", hostnameOr("cli"), os.Getpid())
			cfg, err := f.config()
			if err != nil {
				return err
			}
			cfg.Tags = map[string]string{observerTag: "1"}
			return runMembers(cmd.Context(), cfg, watch, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.join, "join", nil, "gossip address of a mesh node (repeatable)")
	fl.StringVar(&f.bind, "gossip", "", "bind address of the observer (default HOST:0 next to --join)")
	fl.BoolVar(&watch, "watch", false, "keep printing changes until interrupted")
	f.registerKey(cmd)
	rootCmd.AddCommand(cmd)
}

// observerBind is the observer's bind address when --gossip is not given:
// loopback for a mesh on loopback, else the local address that routes to
// the node joined (port 0), never every interface.
func observerBind(join string) string {
	host, _, err := net.SplitHostPort(join)
	if ip := net.ParseIP(host); err == nil && (host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return "127.0.0.1:0"
	}
	if c, err := net.Dial("udp", join); err == nil {
		defer c.Close()
		if ua, ok := c.LocalAddr().(*net.UDPAddr); ok {
			return net.JoinHostPort(ua.IP.String(), "0")
		}
	}
	return "0.0.0.0:0"
}
