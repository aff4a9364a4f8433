package discovery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestEndpointCompaction(t *testing.T) {
	for _, tc := range []struct {
		ep, host, compact string
	}{
		{"tcp://10.0.0.5:5557", "10.0.0.5", ":5557"},
		{"tcp://10.0.0.6:5557", "10.0.0.5", "10.0.0.6:5557"},
		{"tcp://[::1]:80", "::1", ":80"},
		{"tcp://example.com:80", "10.0.0.5", "example.com:80"},
		{"ipc:///tmp/x.sock", "10.0.0.5", "ipc:///tmp/x.sock"},
		{"inproc://x", "", "inproc://x"},
		{"tcp://10.0.0.5:5557", "", "10.0.0.5:5557"},
	} {
		got := compactEndpoint(tc.ep, tc.host)
		if got != tc.compact {
			t.Errorf("compact(%q, %q) = %q, want %q", tc.ep, tc.host, got, tc.compact)
		}
		if back := expandEndpoint(got, tc.host); back != tc.ep {
			t.Errorf("expand(%q, %q) = %q, want %q", got, tc.host, back, tc.ep)
		}
	}
}

// TestWildcardEndpointsExpandToTheNode checks that a service bound on a
// wildcard address is advertised so that others reach it at the node's
// address.
func TestWildcardEndpointsExpandToTheNode(t *testing.T) {
	for _, ep := range []string{"tcp://0.0.0.0:5557", "tcp://[::]:5557", "tcp://*:5557"} {
		c := compactEndpoint(ep, "10.0.0.5")
		if c != ":5557" {
			t.Fatalf("compact(%q) = %q, want :5557", ep, c)
		}
		if got := expandEndpoint(c, "10.0.0.7"); got != "tcp://10.0.0.7:5557" {
			t.Fatalf("expanded on another node's address: %q", got)
		}
		// A wildcard stored uncompacted also expands to the node.
		if got := expandEndpoint(strings.TrimPrefix(ep, "tcp://"), "10.0.0.7"); got != "tcp://10.0.0.7:5557" {
			t.Fatalf("uncompacted %q expanded to %q", ep, got)
		}
	}
}

func TestTagsRoundTrip(t *testing.T) {
	host := "10.0.0.5"
	svcs := map[string]Service{
		"jobs":  {Name: "jobs", Kind: "PULL", Endpoints: []string{"tcp://10.0.0.5:5557"}},
		"api":   {Name: "api", Kind: "ROUTER", Endpoints: []string{"tcp://10.0.0.9:1", "ipc:///run/api"}},
		"local": {Name: "local", Kind: "REP", Endpoints: []string{"inproc://x"}},
	}
	spool := &SpoolAd{Endpoint: "tcp://10.0.0.5:6000", Streams: []string{"access-log", "audit"}}
	user := map[string]string{"zone": "eu-1", "role": "web"}
	tags := buildTags(user, svcs, spool, host)
	if tags["~sjobs"] != "PULL|:5557" || tags["~q"] != ":6000|access-log,audit" {
		t.Fatalf("unexpected encoding: %v", tags)
	}
	a := decodeTags(tags, host)
	if !maps.Equal(a.user, user) {
		t.Errorf("user = %v", a.user)
	}
	if !reflect.DeepEqual(a.services, svcs) {
		t.Errorf("services = %v", a.services)
	}
	if !reflect.DeepEqual(a.spool, spool) {
		t.Errorf("spool = %v", a.spool)
	}
	// Spool with no streams.
	a = decodeTags(buildTags(nil, nil, &SpoolAd{Endpoint: "tcp://1.2.3.4:5"}, host), host)
	if a.spool == nil || a.spool.Endpoint != "tcp://1.2.3.4:5" || len(a.spool.Streams) != 0 {
		t.Errorf("empty spool = %+v", a.spool)
	}
}

func TestDecodeIgnoresMalformed(t *testing.T) {
	a := decodeTags(map[string]string{
		"~sbad":   "no-separator",
		"~s":      "REP|:1",
		"~sx":     "|:1",
		"~sy":     "REP|",
		"~sz":     "REP|a,,b",
		"~q":      "",
		"~future": "whatever",
		"ok":      "1",
	}, "1.2.3.4")
	if len(a.services) != 0 || a.spool != nil || len(a.user) != 1 {
		t.Fatalf("decoded %+v", a)
	}
}

func TestTagsSizeMatchesSerf(t *testing.T) {
	// Fill the budget exactly: a tag whose value grows until the limit.
	tags := map[string]string{}
	var last int
	for i := 0; ; i++ {
		tags["k"] = strings.Repeat("v", i)
		n := tagsSize(tags)
		if n > MaxTagsSize {
			break
		}
		last = n
	}
	if last < MaxTagsSize-3 {
		t.Fatalf("largest fitting size %d, want close to %d", last, MaxTagsSize)
	}
	// serf agrees on the boundary.
	m := newNode(t, "size", nil)
	if err := m.serf.SetTags(tags); err == nil {
		t.Fatalf("serf accepted %d bytes", tagsSize(tags))
	}
	tags["k"] = tags["k"][1:]
	if err := m.serf.SetTags(tags); err != nil {
		t.Fatalf("serf refused %d bytes: %v", tagsSize(tags), err)
	}
	tags["k"] += "v"
	err := checkTagsSize(tags)
	var tl *TagsTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTagsTooLarge) || tl.Size <= MaxTagsSize {
		t.Fatalf("checkTagsSize = %v", err)
	}
}

// TestAdvertisementCapacity documents how much fits in the budget.
func TestAdvertisementCapacity(t *testing.T) {
	svcs := map[string]Service{}
	n := 0
	for ; ; n++ {
		name := "service-" + itoa(n)
		svcs[name] = Service{Name: name, Kind: "ROUTER", Endpoints: []string{"tcp://10.0.0.5:" + itoa(5000+n)}}
		if checkTagsSize(buildTags(nil, svcs, nil, "10.0.0.5")) != nil {
			break
		}
	}
	t.Logf("%d services with one local tcp endpoint fit in %d bytes", n, MaxTagsSize)
	if n < 15 {
		t.Fatalf("only %d services fit", n)
	}
}

func TestParseLogLine(t *testing.T) {
	for _, tc := range []struct {
		in        string
		level     slog.Level
		component string
		text      string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5", slog.LevelDebug, "memberlist", "Stream connection from=127.0.0.1:5"},
		{"[INFO] serf: EventMemberJoin: a 127.0.0.1", slog.LevelInfo, "serf", "EventMemberJoin: a 127.0.0.1"},
		{"[WARN] serf: Name conflict", slog.LevelWarn, "serf", "Name conflict"},
		{"[ERR] memberlist: Failed to send ping", slog.LevelWarn, "memberlist", "Failed to send ping"},
		{"[ERROR] x", slog.LevelWarn, "gossip", "x"},
		{"no prefix at all", slog.LevelInfo, "gossip", "no prefix at all"},
		{"[", slog.LevelInfo, "gossip", "["},
		{"[WARN] serf: Shutdown without a Leave", slog.LevelInfo, "serf", "Shutdown without a Leave"},
	} {
		l, c, txt := parseLogLine(tc.in)
		if l != tc.level || c != tc.component || txt != tc.text {
			t.Errorf("parseLogLine(%q) = %v %q %q", tc.in, l, c, txt)
		}
	}
}

type recordHandler struct {
	slog.Handler
	recs *[]slog.Record
}

func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	*h.recs = append(*h.recs, r)
	return nil
}

func TestGossipLoggerGoesToSlog(t *testing.T) {
	var recs []slog.Record
	h := recordHandler{Handler: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}), recs: &recs}
	l := newGossipLogger(slog.New(h))
	l.Printf("[DEBUG] memberlist: hidden")
	l.Printf("[WARN] serf: shown %d", 1)
	l.Print("[INFO] memberlist: a\n[ERR] memberlist: b")
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3", len(recs))
	}
	if recs[0].Level != slog.LevelWarn || recs[0].Message != "gossip log" {
		t.Fatalf("record 0: %v %q", recs[0].Level, recs[0].Message)
	}
	var text string
	recs[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "text" {
			text = a.Value.String()
		}
		return true
	})
	if text != "shown 1" {
		t.Fatalf("text attr %q", text)
	}
}
