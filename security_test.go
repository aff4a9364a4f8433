package fastmq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

// gossipKey encrypts the gossip of the secure meshes in these tests.
var gossipKey = bytes.Repeat([]byte{7}, 32)

func curveKeys(t testing.TB) (pub, sec socket.CurveKey) {
	t.Helper()
	pub, sec, err := socket.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	return pub, sec
}

// logLines collects a node's log records (message and attributes).
type logLines struct {
	mu    *sync.Mutex
	lines *[]string
	attrs string
}

func newLogLines() logLines { return logLines{mu: new(sync.Mutex), lines: new([]string)} }

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message + l.attrs)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	*l.lines = append(*l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l logLines) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		l.attrs += fmt.Sprintf(" %s=%v", a.Key, a.Value)
	}
	return l
}
func (l logLines) WithGroup(string) slog.Handler { return l }

// has reports whether a line holds every one of parts.
func (l logLines) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range *l.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// secureNode starts a node; mod adjusts its config.
func secureNode(t *testing.T, name string, mod func(*fastmq.Config)) *fastmq.Node {
	t.Helper()
	cfg := fastmq.Config{Name: name, DataDir: filepath.Join(t.TempDir(), name)}
	if mod != nil {
		mod(&cfg)
	}
	n, err := fastmq.New(cfg)
	if err != nil {
		t.Fatalf("start node %s: %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// readAll reads want records of stream with a fresh consumer on n and
// returns how many came from each publisher.
func readAll(t *testing.T, n *fastmq.Node, name, stream string, want int) map[string]int {
	t.Helper()
	c, err := n.Consume(fastmq.ConsumerConfig{Stream: stream, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]int{}
	for range want {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("%s reading %s on %s: %v after %v", name, stream, n.Name(), err, got)
		}
		got[m.Publisher]++
		c.Ack(m)
	}
	return got
}

// waitMembers waits until every node sees all of them alive.
func waitMembers(t *testing.T, nodes ...*fastmq.Node) {
	t.Helper()
	testutil.WaitFor(t, "every node sees the others", 30*time.Second, func() bool {
		for _, n := range nodes {
			alive := 0
			for _, m := range n.Membership().Members() {
				if m.Status == discovery.StatusAlive {
					alive++
				}
			}
			if alive != len(nodes) {
				return false
			}
		}
		return true
	})
}

// TestCurveMeshACL: three nodes with CURVE keys and an encrypted gossip.
// A consumer whose key the publishers' ACL does not name for a stream
// gets ErrForbidden naming the stream (and the publishers count it),
// while it reads the streams the ACL gives it and the other nodes read
// everything; group fetches obey the same ACL; Call and Dial reach
// services (Handle, Serve) over CURVE with the key their node advertises.
func TestCurveMeshACL(t *testing.T) {
	apub, asec := curveKeys(t)
	bpub, bsec := curveKeys(t)
	cpub, csec := curveKeys(t)
	acl := &pull.ACL{Rules: []pull.ACLRule{
		{Client: apub.Z85(), Streams: []string{"*"}},
		{Client: bpub.Z85(), Streams: []string{"*"}},
		{Client: cpub.Z85(), Streams: []string{"logs-*"}},
	}}
	ipcDir := testutil.ShortDir(t)
	mk := func(name string, sec socket.CurveKey, seed *fastmq.Node) *fastmq.Node {
		return secureNode(t, name, func(c *fastmq.Config) {
			c.Key, c.CurveKey, c.ACL = gossipKey, sec, acl
			c.LocalIPCDir = ipcDir
			if seed != nil {
				c.Seeds = []string{seed.GossipAddr()}
			}
		})
	}
	a := mk("a", asec, nil)
	b := mk("b", bsec, a)
	c := mk("c", csec, a)
	if a.CurvePublicKey() != apub {
		t.Fatal("node a does not report its public key")
	}
	waitMembers(t, a, b, c)
	for _, n := range []*fastmq.Node{a, b} {
		publish(t, n, "audit", 20)
		publish(t, n, "logs-a", 20)
	}
	testutil.WaitFor(t, "streams advertised", 30*time.Second, func() bool {
		return len(c.Membership().LookupStream("audit")) == 2 && len(c.Membership().LookupStream("logs-a")) == 2
	})

	if got := readAll(t, c, "c-logs", "logs-a", 40); got["a"] != 20 || got["b"] != 20 {
		t.Fatalf("c read %v of logs-a", got)
	}
	if got := readAll(t, b, "b-audit", "audit", 40); got["a"] != 20 || got["b"] != 20 {
		t.Fatalf("b read %v of audit", got)
	}
	cons, err := c.Consume(fastmq.ConsumerConfig{Stream: "audit", Name: "c-audit"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cons.Next(ctx)
	var fe *pull.FetchError
	if !errors.Is(err, pull.ErrForbidden) || !errors.As(err, &fe) || fe.Stream != "audit" || !strings.Contains(err.Error(), `"audit"`) {
		t.Fatalf("c reading audit: %v, want ErrForbidden naming the stream", err)
	}
	testutil.WaitFor(t, "refusals counted", 30*time.Second, func() bool {
		return a.Status().Server.Forbidden >= 1 && b.Status().Server.Forbidden >= 1
	})

	// Group fetches go through the same ACL: b's member leases every
	// record, c's member is refused (counted) on both publishers.
	fa, fb := a.Status().Server.Forbidden, b.Status().Server.Forbidden
	gb, err := b.Group(fastmq.GroupConfig{Stream: "audit", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		m, err := gb.Next(ctx)
		if err != nil {
			t.Fatalf("b's group member: %v", err)
		}
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A socket of the program's own, with the node's client settings.
	if st, err := group.Info(ctx, a.SpoolEndpoint(), "audit", "g", b.ClientSocketConfig(socket.Config{})); err != nil || st.Acked != 20 {
		t.Fatalf("group info from b over CURVE: %+v, %v", st, err)
	}
	gc, err := c.Group(fastmq.GroupConfig{Stream: "audit", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "group fetches refused on both publishers", 30*time.Second, func() bool {
		return a.Status().Server.Forbidden > fa && b.Status().Server.Forbidden > fb
	})
	// c's member says so, once per publisher, instead of retrying quietly.
	for range 2 {
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := gc.Next(nctx)
		cancel()
		if !errors.Is(err, group.ErrForbidden) {
			t.Fatalf("c's group member: %v, want group.ErrForbidden", err)
		}
	}

	if _, err := a.Handle("upper", func(_ context.Context, req []byte) ([]byte, error) {
		return bytes.ToUpper(req), nil
	}, fastmq.HandleOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Call(ctx, "upper", []byte("curve"), rpc.CallOptions{WaitForInstance: true})
	if err != nil || string(rep) != "CURVE" {
		t.Fatalf("call over CURVE: %q, %v", rep, err)
	}
	// On one host, the call went over a's unix socket, a CURVE server too.
	if cl, err := c.RPCClient("upper"); err != nil {
		t.Fatal(err)
	} else if ins := cl.Instances(); len(ins) != 1 || len(ins[0].Endpoints) != 1 || !strings.HasPrefix(ins[0].Endpoints[0], "ipc://"+ipcDir+"/") {
		t.Fatalf("c reaches upper at %+v, want a's unix socket in %s", ins, ipcDir)
	}

	// Serve and Dial: a served PULL is a CURVE server of the node's key,
	// the dialling PUSH connects with it.
	pullSock, err := b.Serve(socket.Pull, "jobs", "tcp://127.0.0.1:0", socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	push, err := c.Dial(socket.Push, "jobs", socket.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := push.Send(ctx, socket.NewMsg([]byte("job"))); err != nil {
		t.Fatal(err)
	}
	if m, err := pullSock.Recv(ctx); err != nil || string(m.Frames[0]) != "job" {
		t.Fatalf("served socket got %v, %v", m, err)
	}
}

// relay is a TCP relay that records every byte it forwards.
type relay struct {
	ln     net.Listener
	target chan string
	mu     sync.Mutex
	seen   bytes.Buffer
	wg     sync.WaitGroup
	conns  []net.Conn
}

func newRelay(t *testing.T) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: make(chan string, 1)}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *relay) accept() {
	defer r.wg.Done()
	target := <-r.target
	r.target <- target
	for {
		a, err := r.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", target)
		if err != nil {
			a.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, a, b)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(a, b)
		go r.pipe(b, a)
	}
}

func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			r.seen.Write(buf[:n])
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (r *relay) close() {
	r.ln.Close()
	select {
	case r.target <- "":
	default:
	}
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) captured() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.seen.Bytes())
}

// TestCurveSpoolTrafficEncrypted: the spool traffic between two CURVE
// nodes, seen by a relay in between (the publisher advertises the relay
// as its spool endpoint), holds none of the record values the consumer
// read; between two nodes without keys, the same relay sees them all (so
// the capture works).
func TestCurveSpoolTrafficEncrypted(t *testing.T) {
	for _, curve := range []bool{true, false} {
		t.Run(fmt.Sprint("curve=", curve), func(t *testing.T) {
			r := newRelay(t)
			_, psec := curveKeys(t)
			_, csec := curveKeys(t)
			p := secureNode(t, "p", func(c *fastmq.Config) {
				c.Key, c.SpoolAdvertise = gossipKey, "tcp://"+r.ln.Addr().String()
				if curve {
					c.CurveKey = psec
				}
			})
			r.target <- strings.TrimPrefix(p.Server().Endpoints()[0], "tcp://")
			cn := secureNode(t, "c", func(c *fastmq.Config) {
				c.Key, c.Seeds = gossipKey, []string{p.GossipAddr()}
				if curve {
					c.CurveKey = csec
				}
			})
			const n = 50
			var values []string
			for i := range n {
				v := fmt.Sprintf("secret-value-%03d-%s", i, strings.Repeat("x", 20))
				values = append(values, v)
				if _, err := p.Publish(context.Background(), "s", []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			testutil.WaitFor(t, "stream advertised", 30*time.Second, func() bool { return len(cn.Membership().LookupStream("s")) == 1 })
			if got := readAll(t, cn, "reader", "s", n); got["p"] != n {
				t.Fatalf("read %v", got)
			}
			seen := r.captured()
			found := 0
			for _, v := range values {
				if bytes.Contains(seen, []byte(v)) {
					found++
				}
			}
			if curve && found != 0 {
				t.Fatalf("%d of %d record values crossed the relay in clear text", found, n)
			}
			if !curve && found != n {
				t.Fatalf("the relay saw %d of %d values without CURVE: the capture does not work", found, n)
			}
		})
	}
}

// TestCurveAndKeylessNodesRefused: a CURVE node and a node without keys
// in one mesh read their own records, and neither connects to the other:
// each says why in its log and in its consumers' status (ErrMixedMesh),
// instead of hanging in a handshake.
func TestCurveAndKeylessNodesRefused(t *testing.T) {
	_, ksec := curveKeys(t)
	klog, zlog := newLogLines(), newLogLines()
	k := secureNode(t, "k", func(c *fastmq.Config) {
		c.Key, c.CurveKey, c.Logger = gossipKey, ksec, slog.New(klog)
	})
	z := secureNode(t, "z", func(c *fastmq.Config) {
		c.Key, c.Seeds, c.Logger = gossipKey, []string{k.GossipAddr()}, slog.New(zlog)
	})
	publish(t, k, "s", 5)
	publish(t, z, "s", 5)
	for _, n := range []*fastmq.Node{k, z} {
		testutil.WaitFor(t, "both publishers seen", 30*time.Second, func() bool { return len(n.Membership().LookupStream("s")) == 2 })
		if got := readAll(t, n, "own", "s", 5); got[n.Name()] != 5 {
			t.Fatalf("%s read %v", n.Name(), got)
		}
	}
	// A running consumer shows the reason in the node's status too.
	for _, tc := range []struct {
		n          *fastmq.Node
		peer, want string
	}{{k, "z", "advertises no CURVE key"}, {z, "k", "speaks CURVE"}} {
		c, err := tc.n.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "watch"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		testutil.WaitFor(t, tc.n.Name()+"'s status says why", 30*time.Second, func() bool {
			for _, cs := range tc.n.Status().Consumers {
				for _, p := range cs.Publishers {
					if cs.Name == "watch" && p.Publisher == tc.peer && strings.Contains(p.ConnError, tc.want) {
						return true
					}
				}
			}
			return false
		})
	}
	testutil.WaitFor(t, "the CURVE node says why", 30*time.Second, func() bool {
		return klog.has("not connecting", "peer z", "advertises no CURVE key")
	})
	testutil.WaitFor(t, "the keyless node says why", 30*time.Second, func() bool {
		return zlog.has("not connecting", "peer k", "speaks CURVE", "this node has no key pair")
	})
}

// TestCurveWithoutGossipKeyNeedsPinnedKeys: without gossip encryption a
// key learnt from gossip proves nothing: a CURVE node refuses a peer whose
// key it has not pinned, saying so, and reads from one whose key is in its
// allow directory (which trusts it back the same way).
func TestCurveWithoutGossipKeyNeedsPinnedKeys(t *testing.T) {
	dir := t.TempDir()
	ppub, psec := curveKeys(t)
	cpub, csec := curveKeys(t)
	if err := socket.WriteCurveKeypair(filepath.Join(dir, "p"), ppub, psec); err != nil {
		t.Fatal(err)
	}
	if err := socket.WriteCurveKeypair(filepath.Join(dir, "c"), cpub, csec); err != nil {
		t.Fatal(err)
	}
	p := secureNode(t, "p", func(c *fastmq.Config) {
		c.CurveKeyFile, c.CurveAllow = filepath.Join(dir, "p.key"), dir
	})
	publish(t, p, "s", 5)
	c := secureNode(t, "c", func(c *fastmq.Config) {
		c.CurveKey, c.CurveAllow, c.Seeds = csec, dir, []string{p.GossipAddr()}
	})
	testutil.WaitFor(t, "stream advertised", 30*time.Second, func() bool { return len(c.Membership().LookupStream("s")) == 1 })
	if got := readAll(t, c, "pinned", "s", 5); got["p"] != 5 {
		t.Fatalf("read %v", got)
	}
	_, esec := curveKeys(t)
	elog := newLogLines()
	e := secureNode(t, "e", func(c *fastmq.Config) {
		c.CurveKey, c.Seeds, c.Logger = esec, []string{p.GossipAddr()}, slog.New(elog)
	})
	testutil.WaitFor(t, "stream advertised", 30*time.Second, func() bool { return len(e.Membership().LookupStream("s")) == 1 })
	cons, err := e.Consume(fastmq.ConsumerConfig{Stream: "s", Name: "unpinned"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	testutil.WaitFor(t, "the unpinned node says why", 30*time.Second, func() bool {
		return elog.has("not connecting", "peer p", "not pinned", "gossip without a key")
	})
}

// TestNodeKeyErrors: nonsense in the node's CURVE settings is refused
// clearly by New.
func TestNodeKeyErrors(t *testing.T) {
	dir := t.TempDir()
	pub, sec := curveKeys(t)
	if err := socket.WriteCurveKeypair(filepath.Join(dir, "n"), pub, sec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*fastmq.Config)
		want string
	}{
		{"missing key file", func(c *fastmq.Config) { c.CurveKeyFile = filepath.Join(dir, "nope.key") }, "no such file"},
		{"both keys", func(c *fastmq.Config) { c.CurveKey, c.CurveKeyFile = sec, filepath.Join(dir, "n.key") }, "both CurveKey and CurveKeyFile"},
		{"trust without key", func(c *fastmq.Config) { c.CurveAllow = dir }, "without a node key"},
		{"missing allow", func(c *fastmq.Config) { c.CurveKey, c.CurveAllow = sec, filepath.Join(dir, "none") }, "trusted keys"},
		{"plain and curve", func(c *fastmq.Config) { c.CurveKey, c.Socket.PlainUsername = sec, "u" }, "no PLAIN or CURVE settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastmq.Config{Name: "n", DataDir: filepath.Join(t.TempDir(), "n")}
			tc.mod(&cfg)
			n, err := fastmq.New(cfg)
			if err == nil {
				n.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}
