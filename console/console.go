// Package console serves FastMQ's web console: a live view of the whole
// mesh (members, streams, consumers and consumer groups and their lag,
// throughput charts, a read-only peek at a stream's records) from any one
// node.
//
// The node serving the page gathers the others' state itself: every node
// advertises its HTTP address in gossip (fastmq.Node.AdvertiseHTTP), and the
// console fetches their /status concurrently with a timeout (GatherMesh,
// FetchStatus). A node that is down shows as down. A peek reads the
// node's own spool (Peek, OffsetAt) or is relayed to the node that holds
// the stream. The page is plain HTML, JavaScript and CSS embedded in the
// binary: no build step, no network access beyond the mesh.
//
// It is the node's HTTP back-end, on the floor above it: Register mounts
// the page, its API, the node's /status and its /metrics on a mux, as
// net/http/pprof does; the fastmq package itself serves only its Status
// (fastmq.Node.StatusHandler).
//
// The fastmq agent (cmd/fastmq, --http) serves it; a program that embeds
// a node serves the same (page, /status and /metrics) on its own mux:
//
//	c, err := console.New(console.Config{Node: node})
//	...
//	c.Register(mux) // or http.ListenAndServe(addr, c.Handler())
//	node.AdvertiseHTTP(addr)
//
// On a node whose spool server has an ACL (or with Config.Tokens), every
// route but the page obeys it: callers are authenticated by bearer token
// as ACL clients (Tokens), a peek needs the read grant, and the views
// show only the streams the caller may read (see Config.Tokens).
//
// The JSON under /api/ is the page's and may change between releases;
// /status and /metrics are the stable interfaces.
package console

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/metrics"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

//go:embed assets
var assets embed.FS

// Defaults of Config.
const (
	DefaultTimeout = 2 * time.Second
	DefaultHistory = 10 * time.Minute
	// minGatherInterval is how long a gathered view is served again to
	// every caller before the mesh is asked anew: many open pages cost the
	// mesh no more than one.
	minGatherInterval = time.Second
	// maxPeek caps the records of one peek page; maxPeekValue the bytes of
	// one value shown.
	maxPeek      = 200
	maxPeekValue = 4096
	// maxPeekAnswer caps a peek page relayed from another node.
	maxPeekAnswer = 8 << 20
)

// Config configures a Console. Node is required.
type Config struct {
	// Node is the node whose view of the mesh is served.
	Node *fastmq.Node
	// Timeout bounds one gathering of the mesh and one proxied peek
	// (default DefaultTimeout).
	Timeout time.Duration
	// History is how far back the throughput charts go (default
	// DefaultHistory).
	History time.Duration
	// Client fetches other nodes' status (nil: a client of its own).
	Client *http.Client
	// Logger receives the console's logs; nil discards them.
	Logger *slog.Logger
	// Tokens, when set, authenticates callers by bearer token as ACL
	// clients. When the node's spool server has an ACL, or Tokens is
	// set, every route obeys it: a caller is its token's client (nil
	// Tokens: none is known), a caller on loopback without a token the
	// anonymous client, one from beyond loopback without a token is
	// refused (401); a peek needs the ACL's read grant (403 otherwise,
	// the same whether the stream exists or not), and /status,
	// /api/mesh and /metrics show only the streams (their groups,
	// consumers, readers) the caller may list (the list grant, which
	// read and admin include).
	Tokens *Tokens
	// PeerToken, when set, is the bearer token the console presents to
	// the other nodes' HTTP when it gathers their status or relays a
	// peek (their Tokens must know it).
	PeerToken string
}

// Console serves the web console of one node. It is safe for concurrent
// use. It runs no goroutine of its own: gathering the mesh happens on
// request (the page polls), at most once a second whatever the number of
// pages open, and each gathering adds a point to the charts' history.
// Close releases the idle connections of its HTTP client.
type Console struct {
	cfg       Config
	log       *slog.Logger
	transport *http.Transport // nil when Config.Client was given

	gather sync.Mutex // serialises gatherings; taken before mu
	mu     sync.Mutex // guards the fields below
	last   *View
	hist   history
	mem    memory
}

// New makes a Console for cfg.Node.
func New(cfg Config) (*Console, error) {
	if cfg.Node == nil {
		return nil, errors.New("console: no node")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	var tr *http.Transport
	if cfg.Client == nil {
		tr = &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
		cfg.Client = &http.Client{Transport: tr}
	}
	if cfg.PeerToken != "" {
		cfg.Client = TokenClient(cfg.Client.Transport, cfg.PeerToken)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Console{cfg: cfg, log: lg.With("component", "console"), transport: tr, hist: history{keep: cfg.History}, mem: memory{}}, nil
}

// Close closes the idle connections of the console's own HTTP client (not
// those of a Config.Client). A request served after Close still works. It
// is idempotent.
func (c *Console) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// Handler serves the console at "/" and its API, with the node's own
// /status and /metrics, on a mux of its own (see Register).
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	c.Register(mux)
	return mux
}

// Register registers the console's handlers on mux, as net/http/pprof
// does on the default mux:
//
//	/            the page (and /assets/...)
//	/api/mesh    the View as JSON
//	/api/peek    ?node=NAME&stream=S&from=OFFSET|time=RFC3339&limit=N
//	/status      this node's fastmq.Status (fastmq.Node.StatusHandler)
//	/metrics     this node's Prometheus metrics (metrics.NodeHandler), and
//	             the down publishers' last known state (see MeshMember.Stale)
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle("/status", c.authed(c.serveStatus))
	mux.Handle("/metrics", c.authed(func(w http.ResponseWriter, r *http.Request, a access) {
		metrics.Handler(func() metrics.Snapshot { return c.metricsSnapshot(a) }).ServeHTTP(w, r)
	}))
	mux.Handle("/api/mesh", c.authed(c.serveMesh))
	mux.Handle("/api/peek", c.authed(c.servePeek))
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle("/assets/", http.StripPrefix("/assets/", files))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	})
}

// View is what /api/mesh serves: the gathered mesh, the rates derived from
// the previous gatherings, and the charts' history.
type View struct {
	Mesh MeshStatus `json:"mesh"`
	// Rates are per second over the last RateWindow or so, keyed
	// "node/stream" for appends and "node/consumer/stream/publisher" for
	// deliveries and acknowledgements; a key is absent until two
	// gatherings saw it.
	AppendRate  map[string]float64 `json:"append_rate"`
	DeliverRate map[string]float64 `json:"deliver_rate"`
	AckRate     map[string]float64 `json:"ack_rate"`
	// GroupDeliverRate and GroupAckRate are the consumer groups' leases
	// and acknowledgements per second, keyed "publisher/stream/group".
	GroupDeliverRate map[string]float64 `json:"group_deliver_rate"`
	GroupAckRate     map[string]float64 `json:"group_ack_rate"`
	History          []Sample           `json:"history"`
}

// Mesh gathers the mesh (or returns the view gathered less than a second
// ago) and updates the history. It blocks for at most the configured
// Timeout, or until ctx ends.
func (c *Console) Mesh(ctx context.Context) View {
	c.gather.Lock()
	defer c.gather.Unlock()
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && time.Since(last.Mesh.Time) < minGatherInterval {
		return *last
	}
	gctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	ms := GatherMesh(gctx, c.cfg.Node, c.cfg.Client)
	cancel()
	for _, m := range ms.Members {
		if m.Down && m.Status == "alive" {
			c.log.Debug("member status not had", "peer", m.Name, "endpoint", m.HTTP, "err", m.Error)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem.fill(&ms)
	v := c.hist.add(ms)
	c.last = &v
	return v
}

func (c *Console) serveMesh(w http.ResponseWriter, r *http.Request, a access) {
	writeJSON(w, http.StatusOK, filterView(c.Mesh(r.Context()), a))
}

// serveStatus serves the node's Status (as fastmq.Node.StatusHandler
// does) with what the caller may see.
func (c *Console) serveStatus(w http.ResponseWriter, _ *http.Request, a access) {
	st := c.cfg.Node.Status()
	filterStatus(&st, a)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}

// FetchView asks the console served at addr (host:port) for its View, with
// client (nil: http.DefaultClient). It blocks until the answer or ctx's end.
func FetchView(ctx context.Context, client *http.Client, addr string) (View, error) {
	if client == nil {
		client = http.DefaultClient
	}
	var v View
	u := "http://" + addr + "/api/mesh"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return v, fmt.Errorf("console: get %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return v, fmt.Errorf("console: get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("console: get %s: %s (is it a fastmq agent's --http address?)", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v, fmt.Errorf("console: get %s: decode: %w", u, err)
	}
	return v, nil
}

// PeekPage is what /api/peek serves: a page of a stream's records on one
// node.
type PeekPage struct {
	Node    string       `json:"node"`
	Stream  string       `json:"stream"`
	From    uint64       `json:"from"`
	Next    uint64       `json:"next"` // where the next page starts
	Records []PeekRecord `json:"records"`
	Error   string       `json:"error,omitempty"`
}

// PeekRecord is one record of a PeekPage. Value is the record's value as
// text when it is UTF-8, else base64 (Base64 set); at most 4 KiB of it
// (Truncated set).
type PeekRecord struct {
	Offset    uint64            `json:"offset"`
	Time      time.Time         `json:"time"`
	Headers   map[string]string `json:"headers,omitempty"`
	Size      int               `json:"size"`
	Value     string            `json:"value"`
	Base64    bool              `json:"base64,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
}

func (c *Console) servePeek(w http.ResponseWriter, r *http.Request, a access) {
	q := r.URL.Query()
	node, stream := q.Get("node"), q.Get("stream")
	n := c.cfg.Node
	if !a.may(stream) {
		writeJSON(w, http.StatusForbidden, PeekPage{Node: node, Stream: stream, Error: pull.ForbiddenMessage(stream)})
		return
	}
	if node != "" && node != n.Name() {
		c.proxyPeek(w, r, node)
		return
	}
	page := PeekPage{Node: n.Name(), Stream: stream}
	limit := 50
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			writeJSON(w, http.StatusBadRequest, PeekPage{Error: "limit: want a positive number"})
			return
		}
		limit = min(v, maxPeek)
	}
	switch {
	case q.Get("time") != "":
		t, err := time.Parse(time.RFC3339Nano, q.Get("time"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, PeekPage{Error: "time: want RFC 3339, e.g. 2006-01-02T15:04:05Z"})
			return
		}
		o, err := OffsetAt(n, stream, t)
		if err != nil {
			page.Error = err.Error()
			writeJSON(w, statusOf(err), page)
			return
		}
		page.From = o
	case q.Get("from") != "":
		o, err := strconv.ParseUint(q.Get("from"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, PeekPage{Error: "from: want an offset"})
			return
		}
		page.From = o
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.Timeout)
	defer cancel()
	recs, next, err := Peek(ctx, n, stream, page.From, limit)
	page.Next = next
	page.Records = make([]PeekRecord, 0, len(recs))
	for _, rec := range recs {
		page.Records = append(page.Records, peekRecord(rec.Offset, rec.Time, rec.Value, rec.Headers))
	}
	if len(recs) > 0 {
		page.From = recs[0].Offset
	}
	code := http.StatusOK
	if err != nil {
		page.Error = err.Error()
		if len(recs) == 0 {
			code = statusOf(err)
		}
	}
	writeJSON(w, code, page)
}

// proxyPeek asks node's own console for the page: records are read where
// the spool is.
func (c *Console) proxyPeek(w http.ResponseWriter, r *http.Request, node string) {
	var addr string
	for _, m := range c.cfg.Node.Membership().Members() {
		if m.Name == node && m.Status == discovery.StatusAlive {
			addr = fastmq.HTTPAddrOf(m.Services)
		}
	}
	if addr == "" {
		writeJSON(w, http.StatusBadGateway, PeekPage{Node: node, Error: "node " + node + " is not alive or advertises no http address"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.Timeout)
	defer cancel()
	q := r.URL.Query()
	q.Del("node")
	fail := func(err error) {
		writeJSON(w, http.StatusBadGateway, PeekPage{Node: node, Stream: q.Get("stream"), Error: err.Error()})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/peek?"+q.Encode(), nil)
	if err != nil {
		fail(err)
		return
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	// The node's page, relayed as it is (its errors included).
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeekAnswer))
	if err != nil {
		fail(err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

func statusOf(err error) int {
	if errors.Is(err, ErrNoStream) {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

func peekRecord(off uint64, t time.Time, value []byte, headers []spool.Header) PeekRecord {
	pr := PeekRecord{Offset: off, Time: t.UTC(), Size: len(value)}
	if len(headers) > 0 {
		pr.Headers = make(map[string]string, len(headers))
		for _, h := range headers {
			pr.Headers[h.Key] = string(h.Value)
		}
	}
	v := value
	if len(v) > maxPeekValue {
		v, pr.Truncated = v[:maxPeekValue], true
	}
	if utf8.Valid(v) || (pr.Truncated && utf8.Valid(trimPartialRune(v))) {
		pr.Value = string(trimPartialRune(v))
	} else {
		pr.Value, pr.Base64 = base64.StdEncoding.EncodeToString(v), true
	}
	return pr
}

// trimPartialRune drops a rune cut in two at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[len(b)-1-i]) {
			if !utf8.FullRune(b[len(b)-1-i:]) {
				return b[:len(b)-1-i]
			}
			break
		}
	}
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
