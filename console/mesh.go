package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/fastmq/fastmq"
)

// MeshStatus is the mesh as one node sees it: every member its gossip
// knows (failed and left ones included), each with its own Status when it
// could be fetched.
type MeshStatus struct {
	Node    string       `json:"node"` // the node that gathered it
	Time    time.Time    `json:"time"`
	Members []MeshMember `json:"members"`
}

// MeshMember is one member in a MeshStatus: the gathering node's gossip
// view of it, and the member's own Status when it answered.
type MeshMember struct {
	fastmq.MemberStatus
	// Missing marks a node that is no gossip member (any more) but that a
	// consumer of the gathering node still pulls from or did: expected,
	// and missing.
	Missing bool `json:"missing,omitempty"`
	// NoHTTP marks an alive member that advertises no HTTP address (it
	// runs without --http, say): up, but its full status is unknown.
	// When it has a spool server, State holds what that server told
	// (ViaSpool): its streams' offsets and its consumer groups.
	NoHTTP   bool `json:"no_http,omitempty"`
	ViaSpool bool `json:"via_spool,omitempty"`
	// Down says the member's status could not be had because it is not
	// alive or did not answer in time (Error says which).
	Down  bool   `json:"down"`
	Error string `json:"error,omitempty"`
	// Stale says State is not the member's answer but the last status it
	// gave before it went down, kept (streams, groups and their lag) by
	// the console until the member is back or an operator forgets it
	// (discovery.Membership.Forget; fastmq members --forget); DownSince
	// is when the console first found it down. A console that never saw
	// the member up has nothing to keep.
	Stale     bool           `json:"stale,omitempty"`
	DownSince time.Time      `json:"down_since,omitzero"`
	Took      time.Duration  `json:"took_ns"`         // how long its status took
	State     *fastmq.Status `json:"state,omitempty"` // nil when Down
}

// meshFetchLimit bounds the concurrent status fetches of GatherMesh.
const meshFetchLimit = 16

// maxStatusBytes caps the size of a member's status answer.
const maxStatusBytes = 16 << 20

// GatherMesh collects the mesh's status as n sees it: n's own Status, and
// that of every other alive member that advertises an HTTP address (see
// fastmq.Node.AdvertiseHTTP), fetched concurrently from its /status with client (nil:
// http.DefaultClient). Of an alive member without HTTP that runs a spool
// server (every publisher does), its streams and consumer groups are
// asked of that server (ViaSpool), as fastmq group ls asks them. ctx bounds the whole gathering: give it a timeout. A
// member that fails to answer in time is marked Down with the error; the
// gathering itself never fails. Observers (fastmq.ObserverTag) are left
// out. It
// blocks until every fetch has returned.
func GatherMesh(ctx context.Context, n *fastmq.Node, client *http.Client) MeshStatus {
	if client == nil {
		client = http.DefaultClient
	}
	self := n.Status()
	ms := MeshStatus{Node: n.Name(), Time: self.Time}
	known := map[string]bool{}
	for _, m := range self.Members {
		known[m.Name] = true
		if m.Tags[fastmq.ObserverTag] != "" {
			continue
		}
		mm := MeshMember{MemberStatus: m}
		switch {
		case m.Name == n.Name():
			st := self
			mm.State = &st
		case m.Status != "alive":
			mm.Down, mm.Error = true, "member "+m.Status
		case m.HTTP == "" && m.SpoolEndpoint != "":
			mm.NoHTTP, mm.Error = true, "no http address advertised: streams and groups through its spool server"
		case m.HTTP == "":
			mm.NoHTTP, mm.Error = true, "no http address advertised"
		}
		ms.Members = append(ms.Members, mm)
	}
	// Publishers our consumers know that gossip does not.
	for _, c := range self.Consumers {
		for _, p := range c.Publishers {
			if !known[p.Publisher] {
				known[p.Publisher] = true
				ms.Members = append(ms.Members, MeshMember{MemberStatus: fastmq.MemberStatus{Name: p.Publisher, Status: "missing", SpoolEndpoint: p.Endpoint},
					Missing: true, Down: true, Error: "not a gossip member, but consumed from"})
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, meshFetchLimit)
	for i := range ms.Members {
		mm := &ms.Members[i]
		viaSpool := mm.NoHTTP && mm.SpoolEndpoint != ""
		if mm.State != nil || mm.Down || (mm.NoHTTP && !viaSpool) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mm.Down, mm.Error = true, ctx.Err().Error()
				return
			}
			defer func() { <-sem }()
			start := time.Now()
			var st fastmq.Status
			var err error
			if viaSpool {
				st, err = statusViaSpool(ctx, n, mm)
				mm.ViaSpool = err == nil
			} else {
				st, err = FetchStatus(ctx, client, mm.HTTP)
			}
			mm.Took = time.Since(start)
			if viaSpool && err != nil {
				mm.Error = "no http address advertised, and its spool server did not answer: " + err.Error()
				return
			}
			if err != nil {
				mm.Down, mm.Error = true, err.Error()
				return
			}
			mm.State = &st
		}()
	}
	wg.Wait()
	sort.Slice(ms.Members, func(i, j int) bool { return ms.Members[i].Name < ms.Members[j].Name })
	return ms
}

// FetchStatus gets a node's Status from its HTTP server at addr (host:port)
// with client (nil: http.DefaultClient). It blocks until the answer or ctx's
// end.
func FetchStatus(ctx context.Context, client *http.Client, addr string) (fastmq.Status, error) {
	var st fastmq.Status
	err := getJSON(ctx, client, "http://"+addr+"/status", &st)
	return st, err
}

// getJSON gets url with client (nil: http.DefaultClient) and decodes its
// JSON answer into v. An answer other than 200 OK is an error carrying
// the answer's first line. It blocks until the answer or ctx's end.
func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fastmq: get %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fastmq: get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxStatusBytes)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(body, 512))
		return fmt.Errorf("fastmq: get %s: %s: %s", url, resp.Status, firstLine(b))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("fastmq: get %s: decode: %w", url, err)
	}
	return nil
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}
