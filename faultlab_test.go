package fastmq_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/netlab"
	"github.com/fastmq/fastmq/internal/testutil"
)

// The fault lab runs five nodes in five network namespaces (netlab), each
// a child process of the test binary (see runFaultLabChild): host 0
// consumes, hosts 1 and 2 publish, hosts 3 and 4 only gossip. Every node
// gossips on port 7946 of its own address and has every other node as a
// seed. The parent reads the children's lines into a faultLab and checks
// what was acknowledged against what arrived.

const faultLabHosts = 5

// faultLabNames are the node names, by host.
var faultLabNames = [faultLabHosts]string{"consumer", "pub1", "pub2", "member3", "member4"}

// faultLab is the parent's view of a running lab.
type faultLab struct {
	t   *testing.T
	lab *netlab.Lab
	key string
	dir string
	ctx context.Context
	// scale multiplies every wait: 4 with the LAN gossip timers.
	scale time.Duration
	proc  [faultLabHosts]*labProc // the running child of each host
	all   []*labProc              // every child started, under mu

	mu       sync.Mutex
	views    [faultLabHosts]string
	acked    map[string]uint64 // publisher → next offset after what Append acknowledged
	done     map[string]uint64 // publisher → next offset at DONE
	proxy    map[string][4]uint64
	inc      int                         // consumer incarnation (restarts)
	got      []map[string]map[uint64]int // per incarnation: publisher → offset → arrivals
	high     []map[string]uint64         // per incarnation: publisher → next offset after the highest arrival
	commits  []map[string]uint64         // per incarnation: publisher → last printed commit
	order    int                         // records that came out of offset order within an incarnation
	lastGot  map[string]time.Time        // publisher → when its last record arrived at the first consumer
	maxGap   map[string]time.Duration    // publisher → longest pause between its records at the first consumer
	bad      []string                    // ERR, BAD and FETCHERR lines, and broken ACK sequences
	stats    []string                    // the consumer's last STAT lines
	statsEnd chan struct{}               // closed at STATS-END
}

// labProc is one child process.
type labProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output ended
	once  sync.Once
}

func newFaultLab(t *testing.T) *faultLab {
	t.Helper()
	lab := netlab.New(t, faultLabHosts)
	keyb := make([]byte, 32)
	rand.Read(keyb)
	scale := time.Duration(1)
	if os.Getenv(faultLabProfile) == "lan" {
		scale = 4
	}
	ctx, cancel := context.WithTimeout(context.Background(), scale*80*time.Second)
	t.Cleanup(cancel)
	f := &faultLab{t: t, lab: lab, scale: scale, key: base64.StdEncoding.EncodeToString(keyb), dir: t.TempDir(), ctx: ctx,
		acked: map[string]uint64{}, done: map[string]uint64{}, proxy: map[string][4]uint64{},
		lastGot: map[string]time.Time{}, maxGap: map[string]time.Duration{}}
	t.Cleanup(f.stopAll) // before the lab is removed
	return f
}

// start runs host i's child with its role; env adds settings.
func (f *faultLab) start(i int, role string, env ...string) {
	t := f.t
	t.Helper()
	var seeds []string
	for j := range faultLabHosts {
		if j != i {
			seeds = append(seeds, f.lab.Addr(j)+":7946")
		}
	}
	cmd := f.lab.Command(f.ctx, i, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), faultLabEnv+"="+role, faultLabName+"="+faultLabNames[i],
		faultLabData+"="+filepath.Join(f.dir, faultLabNames[i]), faultLabBind+"="+f.lab.Addr(i)+":7946",
		faultLabSeeds+"="+strings.Join(seeds, ","), faultLabKey+"="+f.key)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &labProc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	f.mu.Lock()
	f.proc[i] = p
	f.all = append(f.all, p)
	if role == "consumer" {
		f.got = append(f.got, map[string]map[uint64]int{})
		f.high = append(f.high, map[string]uint64{})
		f.commits = append(f.commits, map[string]uint64{})
		f.inc = len(f.got) - 1
	}
	inc := f.inc
	f.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.line(i, inc, sc.Text())
		}
	}()
}

// stopAll stops every child at once (each shuts its node down) and waits
// for them.
func (f *faultLab) stopAll() {
	f.mu.Lock()
	all := f.all
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(false) }()
	}
	wg.Wait()
}

// stop ends the child: by closing its stdin (it shuts its node down and
// exits), or with SIGKILL; either way it waits for the process.
func (p *labProc) stop(kill bool) {
	p.once.Do(func() {
		if kill {
			p.cmd.Process.Signal(syscall.SIGKILL)
		} else {
			p.stdin.Close()
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		p.cmd.Wait()
	})
}

// send writes a command line to host i's child.
func (f *faultLab) send(i int, cmd string) {
	f.t.Helper()
	if _, err := io.WriteString(f.proc[i].stdin, cmd+"\n"); err != nil {
		f.t.Fatalf("send %s to host %d: %v", cmd, i, err)
	}
}

// line records one line of host i's child (the consumer's incarnation inc).
func (f *faultLab) line(i, inc int, l string) {
	fields := strings.Fields(l)
	if len(fields) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name := faultLabNames[i]
	u := func(k int) uint64 {
		if k >= len(fields) {
			return 0
		}
		v, _ := strconv.ParseUint(fields[k], 10, 64)
		return v
	}
	switch fields[0] {
	case "VIEW":
		f.views[i] = ""
		if len(fields) > 1 {
			f.views[i] = fields[1]
		}
	case "ACK":
		if first := u(1); first != f.acked[name] {
			f.bad = append(f.bad, fmt.Sprintf("%s: ACK at %d, want %d", name, first, f.acked[name]))
		}
		f.acked[name] = u(1) + u(2)
	case "DONE":
		f.done[name] = u(1)
	case "PROXY":
		f.proxy[name] = [4]uint64{u(1), u(2), u(3), u(4)}
	case "GOT":
		pub, off := fields[1], u(2)
		g := f.got[inc][pub]
		if g == nil {
			g = map[uint64]int{}
			f.got[inc][pub] = g
		}
		g[off]++
		if inc == 0 {
			now := time.Now()
			if last, ok := f.lastGot[pub]; ok && now.Sub(last) > f.maxGap[pub] {
				f.maxGap[pub] = now.Sub(last)
			}
			f.lastGot[pub] = now
		}
		if off+1 <= f.high[inc][pub] {
			f.order++
		} else {
			f.high[inc][pub] = off + 1
		}
	case "COMMIT":
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseUint(v, 10, 64)
			f.commits[inc][k] = n
		}
	case "STAT":
		f.stats = append(f.stats, l)
	case "STATS-END":
		if f.statsEnd != nil {
			close(f.statsEnd)
			f.statsEnd = nil
		}
	default: // ERR, BAD, FETCHERR and anything unexpected
		f.bad = append(f.bad, name+": "+l)
	}
}

// check fails the test at once if a child reported a failure.
func (f *faultLab) check() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		f.t.Fatalf("children reported failures:\n%s", strings.Join(f.bad, "\n"))
	}
}

// wait polls cond (under the lab's lock) until it holds, failing on a
// child's reported failure or after timeout.
func (f *faultLab) wait(what string, timeout time.Duration, cond func() bool) {
	f.t.Helper()
	testutil.WaitFor(f.t, what, f.scale*timeout, func() bool {
		f.mu.Lock()
		failed := len(f.bad) > 0
		ok := cond()
		f.mu.Unlock()
		return failed || ok
	})
	f.check()
}

// faultLabAll is every node's name, sorted and joined as in a VIEW line.
const faultLabAll = "consumer,member3,member4,pub1,pub2"

// converged reports whether every host sees every host alive. The caller
// holds f.mu.
func (f *faultLab) converged() bool {
	for i := range faultLabHosts {
		if f.views[i] != faultLabAll {
			return false
		}
	}
	return true
}

// sees reports whether host i sees name alive. The caller holds f.mu.
func (f *faultLab) sees(i int, name string) bool {
	return slices.Contains(strings.Split(f.views[i], ","), name)
}

// received reports how many records of pub the consumer's current
// incarnation has received in order (its next offset). The caller holds
// f.mu.
func (f *faultLab) received(pub string) uint64 { return f.high[f.inc][pub] }

// tally counts, for every publisher, what was acknowledged, what arrived,
// what is missing and what arrived twice, and fails on a record missing,
// on a duplicate within one consumer incarnation, and on a duplicate in a
// later incarnation below the commit point it restarted from.
// It returns how many records arrived again after a restart, as allowed.
func (f *faultLab) tally(pubs ...string) (redeliveredAll uint64) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, pub := range pubs {
		acked := f.acked[pub]
		var arrived, missing, redelivered, dupBad uint64
		var examples []string
		for off := uint64(0); off < acked; off++ {
			total := 0
			for inc := range f.got {
				n := f.got[inc][pub][off]
				total += n
				if n > 1 {
					dupBad++
					examples = append(examples, fmt.Sprintf("offset %d twice in incarnation %d", off, inc))
					continue
				}
				if n == 1 && inc > 0 {
					earlier := false
					for j := range inc {
						earlier = earlier || f.got[j][pub][off] > 0
					}
					if earlier {
						if off < f.commits[inc-1][pub] {
							dupBad++
							examples = append(examples, fmt.Sprintf("offset %d again in incarnation %d, below its commit point %d", off, inc, f.commits[inc-1][pub]))
						} else {
							redelivered++
						}
					}
				}
			}
			if total == 0 {
				missing++
				if missing <= 5 {
					examples = append(examples, fmt.Sprintf("offset %d missing", off))
				}
			} else {
				arrived++
			}
		}
		var beyond int
		for inc := range f.got {
			for off := range f.got[inc][pub] {
				if off >= acked {
					beyond++
				}
			}
		}
		f.t.Logf("%s: %d acknowledged, %d arrived, %d missing, %d arrived again after a restart (at or above the commit point), %d duplicates that break exactly-once per commit point, %d beyond the acknowledged end; longest pause between its records at the first consumer %v",
			pub, acked, arrived, missing, redelivered, dupBad, beyond, f.maxGap[pub].Round(time.Millisecond))
		if acked == 0 || missing > 0 || dupBad > 0 || beyond > 0 {
			if len(examples) > 10 {
				examples = examples[:10]
			}
			f.t.Errorf("%s: delivery broken: %s", pub, strings.Join(examples, "; "))
		}
		redeliveredAll += redelivered
	}
	if f.order > 0 {
		f.t.Errorf("%d records arrived out of offset order within one consumer incarnation", f.order)
	}
	return redeliveredAll
}

// consumerStats asks the consumer for its per-publisher counters and logs
// them.
func (f *faultLab) consumerStats() []string {
	f.t.Helper()
	ch := make(chan struct{})
	f.mu.Lock()
	f.stats, f.statsEnd = nil, ch
	f.mu.Unlock()
	f.send(0, "STATS")
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		f.t.Fatal("the consumer did not answer STATS")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.stats {
		f.t.Log(s)
	}
	return f.stats
}

// finish stops the publishers, waits for their DONE and for the consumer
// to receive everything they acknowledged.
func (f *faultLab) finish() {
	f.t.Helper()
	stop := time.Now()
	f.send(1, "STOP")
	f.send(2, "STOP")
	f.wait("the publishers' DONE", 10*time.Second, func() bool { return len(f.done) == 2 })
	f.mu.Lock()
	for pub, next := range f.done {
		if f.acked[pub] != next {
			f.t.Errorf("%s: DONE at %d but ACKs reached %d", pub, next, f.acked[pub])
		}
	}
	f.mu.Unlock()
	f.wait("the consumer to receive every acknowledged record", 30*time.Second, func() bool {
		return f.received("pub1") >= f.acked["pub1"] && f.received("pub2") >= f.acked["pub2"]
	})
	f.t.Logf("every acknowledged record received %v after the publishers stopped", time.Since(stop).Round(time.Millisecond))
}

// startAll starts the five hosts and waits until gossip has converged and
// the consumer receives from both publishers.
func (f *faultLab) startAll(pubEnv ...string) {
	f.t.Helper()
	f.start(0, "consumer")
	f.start(1, "publisher", pubEnv...)
	f.start(2, "publisher")
	f.start(3, "member")
	f.start(4, "member")
	start := time.Now()
	f.wait("gossip to converge", 30*time.Second, f.converged)
	f.t.Logf("gossip converged %v after start", time.Since(start).Round(time.Millisecond))
	f.wait("records from both publishers", 20*time.Second, func() bool {
		return f.received("pub1") >= 100 && f.received("pub2") >= 100
	})
}

// TestFaultLabPartition proves that a publisher cut off the network (link
// down) while it appends and a consumer pulls loses nothing: after a blip
// below failure detection and after a partition the mesh notices, gossip
// reconverges and the consumer's connection to it carries records again,
// and, with the consumer also killed and restarted once, every
// acknowledged record arrives exactly once per commit point.
func TestFaultLabPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process network test")
	}
	f := newFaultLab(t)
	f.startAll()

	// A blip first: the link down while pub1 appends 100 records (about
	// 200 ms, below failure detection); the consumer's connection must
	// carry records again.
	f.mu.Lock()
	ackedAtCut := f.acked["pub1"]
	f.mu.Unlock()
	f.lab.Partition(1)
	f.wait("pub1 to append 100 records during the blip", 10*time.Second, func() bool {
		return f.acked["pub1"] >= ackedAtCut+100
	})
	f.lab.Heal(1)
	blip := time.Now()
	f.mu.Lock()
	ackedAtBlip := f.acked["pub1"]
	f.mu.Unlock()
	f.wait("the consumer to receive pub1's records after the blip", 20*time.Second, func() bool {
		return f.received("pub1") >= ackedAtBlip
	})
	t.Logf("the consumer received pub1's records from the blip %v after it", time.Since(blip).Round(time.Millisecond))
	f.wait("gossip to converge after the blip", 30*time.Second, f.converged)

	f.mu.Lock()
	ackedAtCut = f.acked["pub1"]
	f.mu.Unlock()
	f.lab.Partition(1)
	cut := time.Now()
	f.wait("the mesh to see pub1 failed", 20*time.Second, func() bool {
		for _, i := range []int{0, 2, 3, 4} {
			if f.sees(i, "pub1") {
				return false
			}
		}
		return true
	})
	t.Logf("the mesh saw pub1 failed %v after the cut", time.Since(cut).Round(time.Millisecond))
	f.wait("pub1 to see the mesh failed", 20*time.Second, func() bool {
		return f.views[1] == "pub1"
	})
	t.Logf("pub1 saw the mesh failed %v after the cut", time.Since(cut).Round(time.Millisecond))
	f.wait("pub1 to go on appending while cut off", 20*time.Second, func() bool {
		return f.acked["pub1"] >= ackedAtCut+500
	})
	f.mu.Lock()
	ackedAtHeal, gotAtHeal := f.acked["pub1"], f.received("pub1")
	f.mu.Unlock()
	if gotAtHeal >= ackedAtHeal {
		t.Fatalf("the consumer received pub1 up to %d while cut off, and pub1 acknowledged %d", gotAtHeal, ackedAtHeal)
	}
	f.lab.Heal(1)
	heal := time.Now()
	f.wait("gossip to reconverge after the heal", 30*time.Second, f.converged)
	t.Logf("gossip reconverged %v after the heal", time.Since(heal).Round(time.Millisecond))
	f.wait("the consumer to catch up with pub1 over a reconnected socket", 30*time.Second, func() bool {
		return f.received("pub1") >= ackedAtHeal+100
	})
	t.Logf("the consumer caught up with pub1 %v after the heal", time.Since(heal).Round(time.Millisecond))
	f.consumerStats()

	// Hold the consumer's commits while it receives, kill it and restart
	// it on its data: it resumes from its committed offsets and receives
	// what it got since again.
	f.mu.Lock()
	held := map[string]uint64{"pub1": f.commits[0]["pub1"], "pub2": f.commits[0]["pub2"]}
	f.mu.Unlock()
	f.send(0, "HOLD")
	f.wait("the consumer to receive 200 records of each publisher past its held commits", 20*time.Second, func() bool {
		return f.received("pub1") >= held["pub1"]+200 && f.received("pub2") >= held["pub2"]+200
	})
	f.proc[0].stop(true)
	f.mu.Lock()
	t.Logf("consumer killed with commits %v, received pub1 %d pub2 %d", f.commits[0], f.received("pub1"), f.received("pub2"))
	f.mu.Unlock()
	f.start(0, "consumer")
	f.wait("gossip to converge after the consumer's restart", 30*time.Second, f.converged)
	f.finish()
	f.consumerStats()
	f.check()
	redelivered := f.tally("pub1", "pub2")
	if redelivered == 0 {
		t.Error("the restarted consumer received nothing again: it did not resume from its commit point")
	}
}

// TestFaultLabProxy proves that a consumer pulling through a fault proxy
// (50 ms delay each way, 5 % of chunks stalled 200 ms as a lost segment
// stalls a TCP stream, 5 % of chunks resetting the connection) receives
// every acknowledged record exactly once and reconnects after each reset.
// Only the spool's TCP stream goes through the proxy; gossip (UDP and
// TCP) stays direct.
func TestFaultLabProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process network test")
	}
	f := newFaultLab(t)
	start := time.Now()
	f.startAll(faultLabProxy + "=50ms,0.05,200ms,0.05")
	f.wait("pub1 to acknowledge 2000 records and the proxy to reset 3 connections", 45*time.Second, func() bool {
		return f.acked["pub1"] >= 2000 && f.proxy["pub1"][3] >= 3
	})
	t.Logf("3 resets and 2000 records %v after start", time.Since(start).Round(time.Millisecond))
	f.finish()
	// After its last reset, the consumer connects again.
	f.wait("the consumer to reconnect after the proxy's last reset", 20*time.Second, func() bool {
		return f.proxy["pub1"][0] > f.proxy["pub1"][3]
	})
	t.Logf("reconnected after the last reset %v after start", time.Since(start).Round(time.Millisecond))
	stats := f.consumerStats()
	f.check()
	f.tally("pub1", "pub2")
	f.mu.Lock()
	px := f.proxy["pub1"]
	f.mu.Unlock()
	t.Logf("proxy: %d connections accepted, %d chunks forwarded, %d stalled, %d resets", px[0], px[1], px[2], px[3])
	for _, s := range stats {
		if strings.HasPrefix(s, "STAT pub1 ") && !strings.Contains(s, "connected=true") {
			t.Errorf("the consumer is not connected to pub1 at the end: %s", s)
		}
	}
}
