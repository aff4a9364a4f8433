package fastmq_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/faultproxy"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// faultLabEnv makes the test binary one host of the fault lab; its value
// is the role: publisher, consumer or member.
const faultLabEnv = "FASTMQ_FAULTLAB_ROLE"

// Fault lab child settings, passed in the environment.
const (
	faultLabName  = "FASTMQ_FAULTLAB_NAME"
	faultLabData  = "FASTMQ_FAULTLAB_DATA"
	faultLabBind  = "FASTMQ_FAULTLAB_BIND"  // gossip host:port
	faultLabSeeds = "FASTMQ_FAULTLAB_SEEDS" // comma-separated
	faultLabKey   = "FASTMQ_FAULTLAB_KEY"   // base64
	faultLabProxy = "FASTMQ_FAULTLAB_PROXY" // publisher: delay,loss,stall,reset
	// faultLabProfile set to "lan" runs the lab with the LAN gossip
	// timers, for a measurement by hand (the waits are four times longer);
	// CI runs the local profile.
	faultLabProfile = "FASTMQ_FAULTLAB_PROFILE"
	faultLabStream  = "lab"
)

// faultLabBatch records are appended every faultLabTick by a publisher,
// up to faultLabMax records in all.
const (
	faultLabBatch = 10
	faultLabTick  = 20 * time.Millisecond
	faultLabMax   = 50000
)

// labOut is a child's stdout: lines buffered under a lock, flushed by the
// view loop and before every commit.
type labOut struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *labOut) println(a ...any) {
	o.mu.Lock()
	fmt.Fprintln(o.w, a...)
	o.mu.Unlock()
}

func (o *labOut) flush() {
	o.mu.Lock()
	o.w.Flush()
	o.mu.Unlock()
}

func (o *labOut) fail(a ...any) {
	o.println(append([]any{"ERR"}, a...)...)
	o.flush()
	os.Exit(2)
}

// runFaultLabChild runs one host of the fault lab inside its namespace.
// Every role prints VIEW lines (the members it sees alive) when its view
// changes, and a publisher behind a fault proxy PROXY lines (its
// counters) when they change. A publisher appends faultLabBatch records every faultLabTick
// and prints ACK first count once Append returned, until STOP on stdin,
// then DONE next. A consumer
// prints GOT publisher offset for every record, commits every 100
// records or 200 ms (flushing first, so every delivered record it
// commits was printed) and prints COMMIT publisher=next... after each;
// after HOLD it stops committing (and the parent kills it), and it answers
// STATS with STAT lines.
// Every role closes its node and exits when stdin ends.
func runFaultLabChild(role string) {
	out := &labOut{w: bufio.NewWriterSize(os.Stdout, 64<<10)}
	key, _ := base64.StdEncoding.DecodeString(os.Getenv(faultLabKey))
	name := os.Getenv(faultLabName)
	bind := os.Getenv(faultLabBind)
	host, _, _ := strings.Cut(bind, ":")
	cfg := fastmq.Config{
		Name: name, DataDir: os.Getenv(faultLabData), GossipAddr: bind, Key: key, RetryJoin: true,
		// The local profile's timers (probe every 250 ms, reconnect to
		// failed members every second) keep the lab short; the LAN
		// profile's serf reconnect interval is 30 s.
		Profile: discovery.ProfileLocal,
	}
	if os.Getenv(faultLabProfile) == "lan" {
		cfg.Profile = discovery.ProfileLAN
	}
	if s := os.Getenv(faultLabSeeds); s != "" {
		cfg.Seeds = strings.Split(s, ",")
	}
	var proxy *faultproxy.Proxy
	if p := os.Getenv(faultLabProxy); p != "" && role == "publisher" {
		var pc faultproxy.Config
		var errs [4]error
		if f := strings.Split(p, ","); len(f) == 4 {
			pc.Delay, errs[0] = time.ParseDuration(f[0])
			pc.Loss, errs[1] = strconv.ParseFloat(f[1], 64)
			pc.Stall, errs[2] = time.ParseDuration(f[2])
			pc.Reset, errs[3] = strconv.ParseFloat(f[3], 64)
		} else {
			errs[0] = errors.New("want delay,loss,stall,reset")
		}
		if err := errors.Join(errs[:]...); err != nil {
			out.fail("proxy setting", p, err)
		}
		// The spool server binds loopback only; the mesh reaches it through
		// the proxy on the host's address, which is what it advertises.
		pc.Listen, pc.Target = host+":7000", "127.0.0.1:7001"
		var err error
		if proxy, err = faultproxy.New(pc); err != nil {
			out.fail(err)
		}
		cfg.SpoolEndpoints = []string{"tcp://127.0.0.1:7001"}
		cfg.SpoolAdvertise = "tcp://" + host + ":7000"
	}
	node, err := fastmq.New(cfg)
	if err != nil {
		out.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the view loop
		defer wg.Done()
		var last string
		var lastProxy faultproxy.Stats
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var alive []string
			for _, m := range node.Membership().Members() {
				if m.Status == discovery.StatusAlive {
					alive = append(alive, m.Name)
				}
			}
			slices.Sort(alive)
			if v := strings.Join(alive, ","); v != last {
				out.println("VIEW", v)
				last = v
			}
			if proxy != nil {
				if ps := proxy.Stats(); ps != lastProxy {
					out.println("PROXY", ps.Accepted, ps.Chunks, ps.Stalls, ps.Resets)
					lastProxy = ps
				}
			}
			out.flush()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	cmds := make(chan string, 10)
	go func() { // stdin; ends with the process
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
		close(cmds)
	}()
	switch role {
	case "publisher":
		labPublish(ctx, out, node, cmds)
	case "consumer":
		labConsume(ctx, out, node, cmds)
	}
	for range cmds { // serve until stdin ends
	}
	cancel()
	wg.Wait()
	closeCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	node.Shutdown(closeCtx)
	if proxy != nil {
		proxy.Close()
	}
	out.flush()
	os.Exit(0)
}

// labPublish appends until STOP (or faultLabMax records) and prints what
// was acknowledged.
func labPublish(ctx context.Context, out *labOut, node *fastmq.Node, cmds <-chan string) {
	name := node.Name()
	tick := time.NewTicker(faultLabTick)
	defer tick.Stop()
	next := uint64(0)
	report := func() {
		out.println("DONE", next)
		out.flush()
	}
	for next < faultLabMax {
		select {
		case c, ok := <-cmds:
			if !ok || c == "STOP" {
				report()
				return
			}
			continue
		case <-tick.C:
		}
		recs := make([]spool.Record, faultLabBatch)
		for i := range recs {
			recs[i].Value = []byte(name + ":" + strconv.FormatUint(next+uint64(i), 10))
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		first, err := node.Append(actx, faultLabStream, recs...)
		cancel()
		if err != nil {
			out.fail("append:", err)
		}
		if first != next {
			out.fail("append: offset", first, "want", next)
		}
		next += faultLabBatch
		out.println("ACK", first, faultLabBatch)
	}
	for c := range cmds {
		if c == "STOP" {
			break
		}
	}
	report()
}

// labConsume pulls the stream from every publisher until stdin ends,
// committing by hand, and answers STATS with its per-publisher counters.
func labConsume(ctx context.Context, out *labOut, node *fastmq.Node, cmds <-chan string) {
	c, err := node.Consume(fastmq.ConsumerConfig{Stream: faultLabStream, Name: "lab", Pull: pull.ConsumerConfig{
		CommitInterval: -1,
		MaxWait:        500 * time.Millisecond,
		RequestTimeout: time.Second,
	}})
	if err != nil {
		out.fail("consume:", err)
	}
	defer c.Close()
	commit := func() {
		out.flush() // every acknowledged record's GOT line is out before its commit
		if err := c.Commit(); err != nil {
			out.fail("commit:", err)
		}
		line := []any{"COMMIT"}
		for _, s := range c.Stats() {
			line = append(line, s.Publisher+"="+strconv.FormatUint(s.Committed, 10))
		}
		out.println(line...)
		out.flush()
	}
	since, lastCommit, hold := 0, time.Now(), false
	for {
		select {
		case cmd, ok := <-cmds:
			if !ok {
				if !hold {
					commit()
				}
				return
			}
			if cmd == "HOLD" {
				hold = true
			}
			if cmd == "STATS" {
				for _, s := range c.Stats() {
					out.println("STAT", s.Publisher, "connected="+strconv.FormatBool(s.Connected),
						"position="+strconv.FormatUint(s.Position, 10), "errors="+strconv.FormatUint(s.Errors, 10),
						"resets="+strconv.FormatUint(s.Resets, 10), "skipped="+strconv.FormatUint(s.RecordsSkipped, 10))
				}
				out.println("STATS-END")
				out.flush()
			}
		default:
		}
		nctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		m, err := c.Next(nctx)
		cancel()
		switch {
		case err == nil:
			if want := m.Publisher + ":" + strconv.FormatUint(m.Offset, 10); string(m.Value) != want || m.Reset {
				out.println("BAD", m.Publisher, m.Offset, strconv.Quote(string(m.Value)), m.Reset)
			}
			out.println("GOT", m.Publisher, m.Offset)
			c.Ack(m)
			since++
		case errors.Is(err, context.DeadlineExceeded):
		default:
			var fe *pull.FetchError
			if errors.As(err, &fe) {
				out.println("FETCHERR", err) // the parent counts these as failures
				continue
			}
			out.fail("next:", err)
		}
		if !hold && (since >= 100 || time.Since(lastCommit) >= 200*time.Millisecond) {
			commit()
			since, lastCommit = 0, time.Now()
		}
	}
}
