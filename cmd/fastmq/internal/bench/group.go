package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/benchkit"
	"github.com/fastmq/fastmq/internal/cpuclock"
	"github.com/fastmq/fastmq/internal/ctxutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// GroupOptions configure `fastmq bench group`.
type GroupOptions struct {
	Count         int // records
	Size          int // record value size
	Members       int // member processes
	Rate          int // records per second (0: as fast as possible)
	Buffer        int // a member's MemberConfig.Buffer
	Concurrency   int // a member's Run concurrency
	MaxAckPending int // a member's MaxAckPending
	// MemberProcs, if positive, is each member process's GOMAXPROCS
	// (0: the runtime's default, the machine's cores).
	MemberProcs int
	Rounds      int
	JSON        bool
	CPUProfile  string // the publisher's; member i writes CPUProfile.member<i>
	MemProfile  string // the publisher's allocation profile; member i writes MemProfile.member<i>
	// LatencyFile, with a Rate, gets every delivered record as a CSV
	// line: round, member, offset, and the Unix ns of its append, its
	// acknowledgement (durable) and its delivery to the handler.
	LatencyFile string
	// VisibleBeforeSync serves records before their fdatasync
	// (spool.Config.VisibleBeforeSync).
	VisibleBeforeSync bool
	// LeaseAfterSync leases records only once durable
	// (group.ServerConfig.LeaseAfterSync; a node's
	// --group-lease-after-sync).
	LeaseAfterSync bool
	// MinSyncInterval paces the stream's fdatasyncs
	// (spool.Config.MinSyncInterval; 0: as a node's streams,
	// fastmq.StreamSyncInterval, or 2 ms under VisibleBeforeSync;
	// negative: back to back).
	MinSyncInterval time.Duration

	// Member mode (a child of the publisher's run).
	Role    string // "member"
	Connect string // the publisher's spool endpoint
}

// GroupResult is one run's figures.
type GroupResult struct {
	Impl    string `json:"impl"`
	Count   int    `json:"count"`
	Size    int    `json:"size"`
	Members int    `json:"members"`
	// MemberProcs is each member process's GOMAXPROCS (0: the default).
	MemberProcs int     `json:"member_procs,omitempty"`
	Rate        int     `json:"rate,omitempty"`
	AckedPerS   float64 `json:"acked_per_s"`
	P50us       float64 `json:"p50_us,omitempty"`
	P99us       float64 `json:"p99_us,omitempty"`
	MaxUs       float64 `json:"max_us,omitempty"`
	// DurableP50us and DurableP99us: from the append's acknowledgement
	// (durable) to delivery: what the group path adds to the fsync.
	DurableP50us float64 `json:"durable_p50_us,omitempty"`
	DurableP99us float64 `json:"durable_p99_us,omitempty"`
	// Heap allocations per record (runtime.MemStats: Mallocs and
	// TotalAlloc) of the publisher process during the run, and of the
	// members together over their lives.
	PubAllocs    float64 `json:"pub_allocs_per_record"`
	PubBytes     float64 `json:"pub_bytes_per_record"`
	MemberAllocs float64 `json:"member_allocs_per_record"`
	MemberBytes  float64 `json:"member_bytes_per_record"`
	// Requests the publisher's spool server received (fetches and
	// settles of every member), per record.
	Requests float64 `json:"requests_per_record"`
	// CPU time (user and system) per record, in µs: the publisher's
	// during the run, the members' together over their lives.
	PubCPUus    float64 `json:"pub_cpu_us_per_record"`
	MemberCPUus float64 `json:"member_cpu_us_per_record"`
}

// memberReport is what a member process prints when its stdin closes.
type memberReport struct {
	Processed int      `json:"processed"`
	LatNs     []int64  `json:"lat_ns,omitempty"`  // append to delivery, with a rate
	Offsets   []uint64 `json:"offsets,omitempty"` // of LatNs's records
	AtNs      []int64  `json:"at_ns,omitempty"`   // when each was delivered (Unix ns)
	Mallocs   uint64   `json:"mallocs"`           // heap allocations of the process
	Bytes     uint64   `json:"bytes"`             // bytes allocated by the process
	CPUNs     int64    `json:"cpu_ns"`            // CPU time of the process (user and system)
}

// Group measures consumer groups end to end: one publisher (this
// process: spool, spool server, group server on tcp loopback) and
// Members member processes of one group; the publisher appends Count
// records while the members lease, handle (nothing) and acknowledge
// them explicitly (Run: nil acks; an ack is confirmed once the
// publisher's group commit holds it). It prints acknowledged records per
// second, from the first append to the last acknowledgement; with a Rate,
// append-to-delivery percentiles.
func Group(ctx context.Context, out io.Writer, o GroupOptions) error {
	if o.Role == "member" {
		return groupMember(ctx, out, o)
	}
	if o.Role != "" {
		return fmt.Errorf("unknown role %q", o.Role)
	}
	if o.Count <= 0 || o.Size < 0 || o.Members <= 0 || o.Rate < 0 {
		return errors.New("--count and --members must be positive, --size and --rate not negative")
	}
	stop, err := cpuProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	defer memProfile(o.MemProfile)
	var lat *bufio.Writer
	if o.LatencyFile != "" {
		f, err := os.Create(o.LatencyFile)
		if err != nil {
			return err
		}
		defer f.Close()
		lat = bufio.NewWriter(f)
		fmt.Fprintln(lat, "round,member,offset,append_ns,durable_ns,delivered_ns")
	}
	var res []GroupResult
	for round := range max(o.Rounds, 1) {
		var dump func(member int, off uint64, appended, durable, delivered int64)
		if lat != nil {
			dump = func(member int, off uint64, appended, durable, delivered int64) {
				fmt.Fprintf(lat, "%d,%d,%d,%d,%d,%d\n", round, member, off, appended, durable, delivered)
			}
		}
		r, err := groupRun(ctx, o, dump)
		if err != nil {
			return err
		}
		if lat != nil {
			if err := lat.Flush(); err != nil {
				return err
			}
		}
		res = append(res, r)
		if o.JSON {
			json.NewEncoder(out).Encode(r)
			continue
		}
		procs := ""
		if r.MemberProcs > 0 {
			procs = fmt.Sprintf(" (GOMAXPROCS %d)", r.MemberProcs)
		}
		fmt.Fprintf(out, "group end to end: 1 publisher, %d member processes%s, %d records of %d B, explicit acks\n", r.Members, procs, r.Count, r.Size)
		fmt.Fprintf(out, "  %.0f acked records/s\n", r.AckedPerS)
		fmt.Fprintf(out, "  CPU per record: publisher %.2f µs, members %.2f µs\n", r.PubCPUus, r.MemberCPUus)
		fmt.Fprintf(out, "  heap allocations per record: publisher %.3f (%.0f B), members %.3f (%.0f B); requests per record %.4f\n", r.PubAllocs, r.PubBytes, r.MemberAllocs, r.MemberBytes, r.Requests)
		if r.Rate > 0 {
			fmt.Fprintf(out, "    durable to delivered (leased, sent, handed to a handler; negative: leased before the fdatasync, the default): p50 %.0f µs  p99 %.0f µs\n", r.DurableP50us, r.DurableP99us)
			fmt.Fprintf(out, "  append-to-delivery latency at %d records/s: p50 %.0f µs  p99 %.0f µs  max %.0f µs\n", r.Rate, r.P50us, r.P99us, r.MaxUs)
		}
	}
	if len(res) > 1 && !o.JSON {
		rates := make([]float64, len(res))
		for i, r := range res {
			rates[i] = r.AckedPerS
		}
		sp := benchkit.SpreadOf(rates)
		fmt.Fprintf(out, "median of %d rounds: %.0f acked records/s (min %.0f, max %.0f)\n", len(res), sp.Median, sp.Min, sp.Max)
	}
	return nil
}

// groupRun runs one round in a fresh spool.
// dump, if not nil, gets every delivered record's figures.
func groupRun(ctx context.Context, o GroupOptions, dump func(member int, off uint64, appended, durable, delivered int64)) (GroupResult, error) {
	res := GroupResult{Impl: "fastmq", Count: o.Count, Size: o.Size, Members: o.Members, MemberProcs: o.MemberProcs, Rate: o.Rate}
	dir, err := os.MkdirTemp("", "fastmq-bench-group-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "stream"), GroupInterval: -1, VisibleBeforeSync: o.VisibleBeforeSync, MinSyncInterval: nodeSyncInterval(o.MinSyncInterval, o.VisibleBeforeSync)})
	if err != nil {
		return res, err
	}
	defer l.Close()
	lookup := func(s string) (*spool.Log, bool) { return l, s == "bench" }
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup, Endpoints: []string{"tcp://127.0.0.1:0"}})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup,
		Open: func(string) (*spool.Log, error) { return nil, errors.New("no dead letters in this benchmark") }, Send: srv,
		LeaseAfterSync: o.LeaseAfterSync})
	if err != nil {
		return res, err
	}
	if err := group.Register(srv, gs); err != nil {
		gs.Close()
		return res, err
	}
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var children []*benchkit.Child[memberReport]
	defer func() {
		for _, c := range children {
			c.Wait()
		}
	}()
	for i := range o.Members {
		args := []string{"bench", "group", "--role", "member", "--connect", srv.Endpoints()[0],
			"--buffer", strconv.Itoa(o.Buffer), "--concurrency", strconv.Itoa(o.Concurrency),
			"--max-ack-pending", strconv.Itoa(o.MaxAckPending), "--rate", strconv.Itoa(o.Rate), "--count", strconv.Itoa(o.Count)}
		if o.CPUProfile != "" {
			args = append(args, "--cpuprofile", fmt.Sprintf("%s.member%d", o.CPUProfile, i))
		}
		if o.MemProfile != "" {
			args = append(args, "--memprofile", fmt.Sprintf("%s.member%d", o.MemProfile, i))
		}
		cmd := exec.CommandContext(ctx, exe, args...)
		if o.MemberProcs > 0 {
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(o.MemberProcs))
		}
		c, err := benchkit.StartChild[memberReport](cmd)
		if err != nil {
			return res, fmt.Errorf("member %d: %w", i, err)
		}
		children = append(children, c)
	}
	// Every member has fetched once (the group exists, with all of them
	// parked on the empty stream): start.
	if err := waitFor(ctx, func() bool { _, ok := gs.Counters("bench", "g"); return ok }); err != nil {
		return res, err
	}
	value := make([]byte, o.Size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	req0 := srv.Stats().Requests
	cpu0 := cpuclock.Process()
	start := time.Now()
	errc := make(chan error, 1)
	var durable []time.Time // by offset, with a rate: when its append was acknowledged
	if o.Rate > 0 {
		durable = make([]time.Time, o.Count)
	}
	go func() { errc <- produce(ctx, l, value, o.Count, o.Rate, durable) }()
	// Done once every ack is on disk: the floor of the group's last
	// commit (the acked counter counts them when they come, and is
	// looked at first: Floors reads the state directory).
	if err := waitFor(ctx, func() bool {
		c, _ := gs.Counters("bench", "g")
		return c.Acked >= uint64(o.Count) && gs.Floors("bench")["g"] >= uint64(o.Count)
	}); err != nil {
		return res, err
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return res, err
	}
	res.AckedPerS = float64(o.Count) / el.Seconds()
	runtime.ReadMemStats(&ms1)
	res.Requests = float64(srv.Stats().Requests-req0) / float64(o.Count)
	res.PubCPUus = float64(cpuclock.Process()-cpu0) / 1e3 / float64(o.Count)
	var memberCPU int64
	res.PubAllocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(o.Count)
	res.PubBytes = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(o.Count)
	var mallocs, bytes uint64
	var lat, toDelivered []int64
	for ci, c := range children {
		rep, err := c.Report()
		if err != nil {
			return res, fmt.Errorf("member %d: %w", ci, err)
		}
		lat = append(lat, rep.LatNs...)
		mallocs += rep.Mallocs
		bytes += rep.Bytes
		memberCPU += rep.CPUNs
		for i, off := range rep.Offsets {
			if off < uint64(len(durable)) && !durable[off].IsZero() && i < len(rep.AtNs) {
				toDelivered = append(toDelivered, rep.AtNs[i]-durable[off].UnixNano())
				if dump != nil && i < len(rep.LatNs) {
					dump(ci, off, rep.AtNs[i]-rep.LatNs[i], durable[off].UnixNano(), rep.AtNs[i])
				}
			}
		}
	}
	res.MemberAllocs = float64(mallocs) / float64(o.Count)
	res.MemberBytes = float64(bytes) / float64(o.Count)
	res.MemberCPUus = float64(memberCPU) / 1e3 / float64(o.Count)
	if len(toDelivered) > 0 {
		slices.Sort(toDelivered)
		res.DurableP50us, res.DurableP99us = usAt(toDelivered, 0.5), usAt(toDelivered, 0.99)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50us, res.P99us, res.MaxUs = usAt(lat, 0.5), usAt(lat, 0.99), usAt(lat, 1)
	}
	return res, nil
}

// usAt is the p-quantile of sorted nanoseconds, in µs.
func usAt(sorted []int64, p float64) float64 { return float64(benchkit.Percentile(sorted, p)) / 1e3 }

// waitFor polls cond every 2 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		if !ctxutil.Sleep(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// groupMember is a member process: it consumes the group until its
// stdin closes, then prints its report.
func groupMember(ctx context.Context, out io.Writer, o GroupOptions) error {
	stop, err := cpuProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	defer memProfile(o.MemProfile)
	host, _ := os.Hostname()
	m, err := group.NewMember(group.MemberConfig{Stream: "bench", Group: "g", Name: fmt.Sprintf("%s-%d", host, os.Getpid()),
		Publishers: map[string]string{"p": o.Connect}, Buffer: o.Buffer, MaxAckPending: o.MaxAckPending})
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the publisher closes stdin at the end
		benchkit.WaitForStop()
		cancel()
	}()
	var mu sync.Mutex
	rep := memberReport{}
	if o.Rate > 0 {
		rep.LatNs = make([]int64, 0, o.Count)
		rep.Offsets = make([]uint64, 0, o.Count)
		rep.AtNs = make([]int64, 0, o.Count)
	}
	if err := benchkit.Ready(out); err != nil {
		return err
	}
	var processed atomic.Int64 // without --rate: the handlers only count
	err = m.Run(ctx, o.Concurrency, func(_ context.Context, msg *group.Message) error {
		if o.Rate == 0 {
			processed.Add(1)
			return nil
		}
		now := time.Now()
		mu.Lock()
		rep.Processed++
		rep.LatNs = append(rep.LatNs, now.Sub(msg.Time).Nanoseconds())
		rep.Offsets = append(rep.Offsets, msg.Offset)
		rep.AtNs = append(rep.AtNs, now.UnixNano())
		mu.Unlock()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	rep.Processed += int(processed.Load())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.Mallocs, rep.Bytes = ms.Mallocs, ms.TotalAlloc
	rep.CPUNs = int64(cpuclock.Process())
	return json.NewEncoder(out).Encode(rep)
}
