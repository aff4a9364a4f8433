package demo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/fastmq/fastmq/patterns/collect"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/ctxutil"
)

// Options are the demo's settings (the flags of fastmq demo).
type Options struct {
	Duration time.Duration
	Rate     int // lines per second per shipper
	Dir      string
	Keep     bool
	// ChildEnv is added to the environment of the shipper and collector
	// processes (tests use it to make the test binary act as fastmq).
	ChildEnv []string
}

const demoStream = "access-log"

// demoSummary is what the demo proves at the end.
type demoSummary struct {
	Produced, Collected, Duplicates, Lost, ConsumerSeen uint64
}

// Run runs the demo as opts says, printing its progress and result to w.
// It fails if a line was lost or collected twice.
func Run(ctx context.Context, opts Options, w io.Writer) (err error) {
	dir := opts.Dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "fastmq-demo-")
		if err != nil {
			return err
		}
		if !opts.Keep {
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(w, "fastmq demo: 3 shipper processes, 1 collector process, 1 independent consumer, on loopback\n")
	fmt.Fprintf(w, "working directory %s (process logs in *.stderr)\n\n", dir)
	sum, err := demoRun(ctx, opts, dir, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsummary: produced %d, collected %d, duplicates %d, lost %d; independent consumer saw %d\n",
		sum.Produced, sum.Collected, sum.Duplicates, sum.Lost, sum.ConsumerSeen)
	if sum.Lost != 0 || sum.Duplicates != 0 || sum.ConsumerSeen != sum.Produced {
		return fmt.Errorf("demo: %d lines lost, %d duplicated, consumer saw %d of %d", sum.Lost, sum.Duplicates, sum.ConsumerSeen, sum.Produced)
	}
	return nil
}

// demoProc is a fastmq child process that the demo can kill and restart.
type demoProc struct {
	name string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *demoProc) start() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// stop sends sig and waits for the process to end (SIGKILL after 10s).
func (p *demoProc) stop(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

func demoRun(ctx context.Context, opts Options, dir string, w io.Writer) (demoSummary, error) {
	var sum demoSummary
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The independent consumer's node is also the gossip seed.
	auditNode, err := fastmq.New(fastmq.Config{Name: "auditor", DataDir: filepath.Join(dir, "auditor")})
	if err != nil {
		return sum, err
	}
	defer auditNode.Close()
	seed := auditNode.GossipAddr()
	audit, err := auditNode.Consume(fastmq.ConsumerConfig{Stream: demoStream, Name: "audit"})
	if err != nil {
		return sum, err
	}
	var auditSeen atomic.Uint64
	var auditWG sync.WaitGroup
	auditWG.Add(1)
	go func() {
		defer auditWG.Done()
		seen := make(map[string]struct{})
		for {
			m, err := audit.Next(ctx)
			if err != nil {
				return
			}
			seen[string(seqOf(m.Value))] = struct{}{}
			auditSeen.Store(uint64(len(seen)))
			audit.Ack(m)
		}
	}()
	defer auditWG.Wait()
	defer cancel()

	gens := make([]*demoGenerator, 3)
	shippers := make([]*demoProc, 3)
	for i := range shippers {
		name := fmt.Sprintf("shipper-%d", i+1)
		gens[i] = &demoGenerator{name: name, path: filepath.Join(dir, name+"-access.log")}
		shippers[i] = &demoProc{
			name: name,
			args: []string{"ship", "--name", name, "--data", filepath.Join(dir, name), "--join", seed,
				"--stream", demoStream, "--file", gens[i].path},
			env: opts.ChildEnv,
			log: filepath.Join(dir, name+".stderr"),
		}
		if err := shippers[i].start(); err != nil {
			return sum, err
		}
		defer shippers[i].stop(syscall.SIGTERM)
	}
	out := filepath.Join(dir, "collected")
	col := &demoProc{
		name: "collector",
		args: []string{"collect", "--name", "collector", "--data", filepath.Join(dir, "collector"), "--join", seed,
			"--stream", demoStream, "--out", out},
		env: opts.ChildEnv,
		log: filepath.Join(dir, "collector.stderr"),
	}
	if err := col.start(); err != nil {
		return sum, err
	}
	defer col.stop(syscall.SIGTERM)

	// The generators write access logs while the shippers follow them.
	genCtx, stopGen := context.WithTimeout(ctx, opts.Duration)
	defer stopGen()
	var gen sync.WaitGroup
	genErr := make(chan error, len(gens))
	for _, g := range gens {
		gen.Add(1)
		go func() {
			defer gen.Done()
			if err := g.run(genCtx, opts.Rate); err != nil {
				genErr <- err
			}
		}()
	}
	defer gen.Wait()

	produced := func() uint64 {
		var n uint64
		for _, g := range gens {
			n += g.written.Load()
		}
		return n
	}
	spooled := func() uint64 {
		var n uint64
		for _, st := range audit.Stats() {
			n += st.High
		}
		return n
	}
	start := time.Now()
	var lastCollected uint64
	fmt.Fprintf(w, "%6s %10s %10s %10s %10s %8s\n", "time", "produced", "spooled", "collected", "consumer", "lines/s")
	report := func() {
		collected := collectedLines(out)
		rate := int64(collected) - int64(lastCollected)
		fmt.Fprintf(w, "%5.0fs %10d %10d %10d %10d %8d\n", time.Since(start).Seconds(), produced(), spooled(), collected, auditSeen.Load(), max(rate, 0))
		lastCollected = collected
	}
	killShipperAt := opts.Duration * 3 / 10
	killCollectorAt := opts.Duration * 55 / 100
	var shipperKilled, collectorKilled bool
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for genCtx.Err() == nil {
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case err := <-genErr:
			return sum, err
		case <-genCtx.Done():
		case <-tick.C:
			report()
			el := time.Since(start)
			if !shipperKilled && el >= killShipperAt {
				shipperKilled = true
				victim := shippers[1]
				fmt.Fprintf(w, "-- kill -9 %s (pid %d); its log keeps growing while it is down\n", victim.name, victim.cmd.Process.Pid)
				victim.stop(syscall.SIGKILL)
				if !ctxutil.Sleep(ctx, 500*time.Millisecond+time.Duration(rand.IntN(500))*time.Millisecond) {
					return sum, ctx.Err()
				}
				if err := victim.start(); err != nil {
					return sum, err
				}
				fmt.Fprintf(w, "-- restarted %s\n", victim.name)
			}
			if !collectorKilled && el >= killCollectorAt {
				collectorKilled = true
				fmt.Fprintf(w, "-- kill -9 collector (pid %d)\n", col.cmd.Process.Pid)
				col.stop(syscall.SIGKILL)
				if !ctxutil.Sleep(ctx, 500*time.Millisecond) {
					return sum, ctx.Err()
				}
				if err := col.start(); err != nil {
					return sum, err
				}
				fmt.Fprintln(w, "-- restarted the collector")
			}
		}
	}
	gen.Wait()
	sum.Produced = produced()
	fmt.Fprintf(w, "-- producers stopped after %d lines; draining\n", sum.Produced)
	drainCtx, drainCancel := context.WithTimeout(ctx, 60*time.Second)
	defer drainCancel()
drain:
	for collectedLines(out) < sum.Produced || auditSeen.Load() < sum.Produced {
		select {
		case <-drainCtx.Done():
			fmt.Fprintln(w, "-- drain timed out")
			break drain
		case <-tick.C:
			report()
		}
	}
	report()
	col.stop(syscall.SIGTERM)
	collected, dups, err := countCollected(out)
	if err != nil {
		return sum, err
	}
	sum.Collected, sum.Duplicates = collected, dups
	sum.ConsumerSeen = auditSeen.Load()
	if unique := collected - dups; unique < sum.Produced {
		sum.Lost = sum.Produced - unique
	}
	return sum, nil
}

// collectedLines sums the positions the collector recorded: the lines it
// synced to its files.
func collectedLines(dir string) uint64 {
	n, _ := collect.Collected(dir) // a file being replaced reads on the next poll
	return n
}

// demoGenerator appends access-log lines to a file.
type demoGenerator struct {
	name    string
	path    string
	written atomic.Uint64
}

var demoPaths = []string{"/", "/index.html", "/api/items", "/api/items/42", "/api/cart", "/login", "/static/app.js", "/static/style.css", "/healthz"}
var demoAgents = []string{"curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64)", "Go-http-client/1.1", "Prometheus/2.53"}

// run appends access-log lines at rate lines/s until ctx ends. Every line
// ends with a unique sequence tag.
func (g *demoGenerator) run(ctx context.Context, rate int) error {
	f, err := os.OpenFile(g.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 64<<10)
	perTick := max(rate/100, 1)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	rng := rand.New(rand.NewPCG(uint64(len(g.name)), uint64(time.Now().UnixNano())))
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			for i := 0; i < perTick; i++ {
				seq++
				status := 200
				if rng.IntN(20) == 0 {
					status = 404
				}
				fmt.Fprintf(bw, "10.%d.%d.%d - - [%s] \"GET %s HTTP/1.1\" %d %d \"-\" \"%s\" seq=%s:%d\n",
					rng.IntN(256), rng.IntN(256), rng.IntN(256), now.Format("02/Jan/2006:15:04:05 -0700"),
					demoPaths[rng.IntN(len(demoPaths))], status, 200+rng.IntN(5000), demoAgents[rng.IntN(len(demoAgents))], g.name, seq)
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			g.written.Store(seq)
		}
	}
}

// seqOf returns the "seq=..." tag of a demo line.
func seqOf(line []byte) []byte {
	if i := bytes.LastIndex(line, []byte(" seq=")); i >= 0 {
		return line[i+5:]
	}
	return line
}

// countCollected reads the collector's files and counts lines and
// duplicated sequence tags.
func countCollected(dir string) (lines, dups uint64, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	seen := make(map[string]struct{})
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines++
			k := string(seqOf(sc.Bytes()))
			if _, ok := seen[k]; ok {
				dups++
			}
			seen[k] = struct{}{}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, 0, err
		}
	}
	return lines, dups, nil
}
