package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
)

// membersPollInterval is how often --watch compares the member list.
const membersPollInterval = 500 * time.Millisecond

// agentTimeout bounds one question to an agent's HTTP server.
const agentTimeout = 5 * time.Second

// formatMember renders one member on one line:
// name addr status services... [spool endpoint streams] [http] [rtt].
// The gossip service of a node's group members is named by the
// stream/group pairs groups lists for it (where publishers see its
// members active), as group-member=STREAM/GROUP,...; unknown (a
// publisher that did not answer, or idle members) it is group-member=?.
func formatMember(m fastmq.MemberStatus, groups []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s\t%s", m.Name, m.Addr, m.Status)
	for _, s := range m.Services {
		if s.Name == group.MemberService {
			fmt.Fprintf(&b, "\tgroup-member=%s", strings.Join(orQuestion(groups), ","))
			continue
		}
		fmt.Fprintf(&b, "\t%s/%s=%s", s.Name, s.Kind, strings.Join(s.Endpoints, ","))
	}
	if m.SpoolEndpoint != "" {
		fmt.Fprintf(&b, "\tspool=%s[%s]", m.SpoolEndpoint, strings.Join(m.Streams, ","))
	}
	if m.HTTP != "" {
		fmt.Fprintf(&b, "\thttp=%s", m.HTTP)
	}
	if m.RTT > 0 {
		fmt.Fprintf(&b, "\trtt=%s", m.RTT.Round(10*time.Microsecond))
	}
	return b.String()
}

// observerTag marks the short-lived nodes of "fastmq members" and "fastmq
// status", so that they list neither their own nor earlier runs' observers.
const observerTag = fastmq.ObserverTag

// withoutObservers drops observers, and self if not empty.
func withoutObservers(ms []fastmq.MemberStatus, self string) []fastmq.MemberStatus {
	out := ms[:0:0]
	for _, m := range ms {
		if m.Name == self || m.Tags[observerTag] != "" {
			continue
		}
		out = append(out, m)
	}
	return out
}

// memberStatuses renders members (from discovery) as the agents' HTTP
// status does, without observers and self.
func memberStatuses(mems []discovery.Member, self string) []fastmq.MemberStatus {
	var out []fastmq.MemberStatus
	for _, mem := range mems {
		ms := fastmq.MemberStatus{Name: mem.Name, Addr: mem.Addr, Status: mem.Status.String(), RTT: mem.RTT,
			Tags: mem.Tags, HTTP: fastmq.HTTPAddrOf(mem.Services)}
		for _, s := range mem.Services {
			if s.Name != fastmq.HTTPService {
				ms.Services = append(ms.Services, fastmq.ServiceStatus{Name: s.Name, Kind: s.Kind, Endpoints: s.Endpoints})
			}
		}
		if mem.Spool != nil {
			ms.SpoolEndpoint, ms.Streams, ms.StreamsPartial = mem.Spool.Endpoint, mem.Spool.Streams, mem.Spool.Partial
		}
		out = append(out, ms)
	}
	return withoutObservers(out, self)
}

// askedMembers asks the mesh, over gossip, for the members that left or
// failed (an observer that just joined never saw them), tells w what the
// answers lacked, and returns a source that lists the observer's view with
// those members added.
func askedMembers(ctx context.Context, m *discovery.Membership, w io.Writer) (membersSource, error) {
	rep, err := m.AskMembers(ctx, discovery.MembersQuery{ExcludeTag: observerTag})
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(rep.Responders, func(n string) bool { return n != m.Name() }) {
		fmt.Fprintln(w, "fastmq members: no member answered the members query (agents before this version do not): "+
			"showing a fresh observer's view, without the members that failed or left before it joined")
	}
	if len(rep.Incomplete) > 0 {
		fmt.Fprintf(w, "fastmq members: the answers of %s stopped before their end: members that left or failed may be missing\n",
			strings.Join(rep.Incomplete, ", "))
	}
	if len(rep.Stripped) > 0 {
		fmt.Fprintf(w, "fastmq members: the tags of %s did not fit a gossip answer: listed without tags, services or spool\n",
			strings.Join(rep.Stripped, ", "))
	}
	return func(context.Context) ([]fastmq.MemberStatus, error) {
		return memberStatuses(rep.Merge(m.Members()), m.Name()), nil
	}, nil
}

// agentMembers asks the agent serving HTTP at addr for its view of the
// mesh: unlike a fresh observer's, it has the members that failed or left.
func agentMembers(ctx context.Context, client *http.Client, addr string) ([]fastmq.MemberStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	st, err := console.FetchStatus(ctx, client, addr)
	if err != nil {
		return nil, err
	}
	return withoutObservers(st.Members, ""), nil
}

// agentHTTP picks the agent to ask for the mesh's status, from what an
// observer learnt by gossip: the member joined at one of join (by gossip address),
// else the first alive member that serves HTTP; "" when none does.
func agentHTTP(m *discovery.Membership, join []string) string {
	var first string
	for _, mem := range m.Members() {
		addr := fastmq.HTTPAddrOf(mem.Services)
		if addr == "" || mem.Status != discovery.StatusAlive || mem.Tags[observerTag] != "" {
			continue
		}
		if slices.Contains(join, mem.Addr) {
			return addr
		}
		if first == "" {
			first = addr
		}
	}
	return first
}

func memberLines(ms []fastmq.MemberStatus, groups map[string][]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		m.RTT = 0 // --watch reports changes of state only
		out[m.Name] = formatMember(m, groups[m.Name])
	}
	return out
}

func orQuestion(s []string) []string {
	if len(s) == 0 {
		return []string{"?"}
	}
	return s
}

// groupAskTimeout bounds members' question to one spool server for its
// groups.
const groupAskTimeout = time.Second

// groupsByNode asks the spool server of every alive member of ms that
// has one for its consumer groups (the group protocol's list, as group
// ls asks, with sock: CURVE with --curve-key, trusting the keys the
// servers gossip; a spool server that wants CURVE does not answer a
// client without it) and returns, by node, the "stream/group" pairs whose
// publishers see that node's members active (group.GroupStats.ActiveNodes),
// sorted.
func groupsByNode(ctx context.Context, ms []fastmq.MemberStatus, sock socket.Config) map[string][]string {
	var mu sync.Mutex
	out := map[string][]string{}
	var wg sync.WaitGroup
	for _, m := range ms {
		if m.Status != "alive" || m.SpoolEndpoint == "" {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, groupAskTimeout)
			defer cancel()
			gs, err := group.List(ctx, m.SpoolEndpoint, group.AllStreams, sock)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, g := range gs {
				for _, n := range g.ActiveNodes {
					if sg := g.Stream + "/" + g.Group; !slices.Contains(out[n], sg) {
						out[n] = append(out[n], sg)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, v := range out {
		slices.Sort(v)
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

// membersSource lists the mesh: an agent's view (over HTTP), or the
// observer's own with what the members it asked over gossip know.
type membersSource func(ctx context.Context) ([]fastmq.MemberStatus, error)

// runMembers prints the members from list, as lines or as JSON, and, with
// watch, keeps printing changes until ctx ends.
func runMembers(ctx context.Context, list membersSource, sock socket.Config, watch, asJSON bool, w io.Writer) error {
	ms, err := list(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ms)
	}
	prev := memberLines(ms, groupsByNode(ctx, ms, sock))
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
		ms, err := list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		cur := memberLines(ms, groupsByNode(ctx, ms, sock))
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

// withObserver joins the mesh as a short-lived observer, runs fn with it
// and leaves gracefully.
func withObserver(ctx context.Context, f gossipFlags, what string, fn func(m *discovery.Membership) error) error {
	if f.bind == "" {
		f.bind = observerBind(f.join[0])
	}
	f.name = fmt.Sprintf("%s-%s-%d", what, hostnameOr("cli"), os.Getpid())
	cfg, err := f.config()
	if err != nil {
		return err
	}
	cfg.Tags = map[string]string{observerTag: "1"}
	m, err := discovery.New(cfg)
	if err != nil {
		return err
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.Background(), gossipLeaveTimeout)
		defer cancel()
		m.Leave(lctx)
	}()
	return fn(m)
}

func init() {
	var obs observerFlags
	var watch, asJSON bool
	var httpAddr, forget, tokenFile string
	cmd := &cobra.Command{
		Use:   "members (--join HOST:PORT | --http HOST:PORT)",
		Short: "Print the gossip mesh, one member a line: name, address, status, services",
		Long: "Print every member of the mesh (name, gossip address, status alive/leaving/left/failed, " +
			"advertised services, spool and HTTP address) as a running agent sees it, failed and " +
			"left members included. With --http, ask the agent serving HTTP there (fastmq agent --http). " +
			"With --join, join the mesh as a short-lived observer, ask the members over gossip " +
			"which members left or failed (a fresh observer never saw them), then leave; no agent " +
			"needs to serve HTTP. " +
			"With --watch keep printing members whose state changes until SIGINT/SIGTERM. " +
			"Observers (this command's own nodes, tagged " + observerTag + ") are not listed. " +
			"With --forget NAME (and --join), remove the failed or left member NAME from every member's " +
			"list (serf's force-leave with prune): the consoles then drop the last known state " +
			"(streams, groups, lag) they kept of it; an alive member is refused.",
		Example: "  fastmq members --join 127.0.0.1:7946\n  fastmq members --http 127.0.0.1:8080 --json\n" +
			"  fastmq members --join 10.0.0.5:7946 --key $KEY --watch\n" +
			"  fastmq members --join 127.0.0.1:7946 --forget pub-3",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if watch && asJSON {
				return fmt.Errorf("--json and --watch exclude each other")
			}
			if forget != "" {
				if len(obs.gf.join) == 0 || httpAddr != "" || watch || asJSON {
					return fmt.Errorf("--forget takes --join only")
				}
				return obs.run(ctx, "forget", func(ctx context.Context, m *discovery.Membership, _ socket.Config) error {
					if err := m.Forget(ctx, forget); err != nil {
						return err
					}
					fmt.Fprintf(out, "forgot %s\n", forget)
					return nil
				})
			}
			if httpAddr != "" {
				if len(obs.gf.join) > 0 {
					return fmt.Errorf("--http and --join exclude each other")
				}
				client, err := tokenClient(tokenFile)
				if err != nil {
					return err
				}
				return runMembers(ctx, func(ctx context.Context) ([]fastmq.MemberStatus, error) { return agentMembers(ctx, client, httpAddr) }, socket.Config{}, watch, asJSON, out)
			}
			if len(obs.gf.join) == 0 {
				return fmt.Errorf("--join or --http is required")
			}
			return obs.run(ctx, "members", func(ctx context.Context, m *discovery.Membership, sock socket.Config) error {
				list, err := askedMembers(ctx, m, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				return runMembers(ctx, list, sock, watch, asJSON, out)
			})
		},
	}
	obs.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&httpAddr, "http", "", "HTTP address of an agent (its --http) to ask, instead of joining the mesh")
	fl.BoolVar(&watch, "watch", false, "keep printing changes until interrupted")
	fl.BoolVar(&asJSON, "json", false, "print the members as a JSON array")
	fl.StringVar(&tokenFile, "token-file", "", "with --http: `FILE` holding a bearer token for the agent's HTTP (its --http-tokens)")
	fl.StringVar(&forget, "forget", "", "remove the failed or left member `NAME` from every member's list, and what consoles kept of it")
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
