package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fastmq/fastmq/socket"
)

// SocketOptions are the flags of bench pushpull, pubsub and reqrep.
type SocketOptions struct {
	Size       int
	Count      int
	Transport  string
	Bind       string
	Connect    string
	Role       string
	HWM        int
	Warmup     time.Duration
	Libzmq     string
	Native     bool
	Python     string
	Separate   bool
	JSON       bool
	CPUProfile string
	Rounds     int
	NoDrop     bool
}

// benchResult is what one run measured.
type benchResult struct {
	Pattern   string
	Transport string
	Size      int
	Sent      int
	Received  int
	Timed     int // messages the elapsed time covers
	Elapsed   time.Duration
	Lat       []time.Duration // sorted
}

func (r benchResult) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Timed) / r.Elapsed.Seconds()
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted)-1) + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

func (r benchResult) print(w io.Writer) {
	fmt.Fprintf(w, "%s %s size=%d: %.0f msg/s, %.1f MB/s", r.Pattern, r.Transport, r.Size,
		r.rate(), r.rate()*float64(r.Size)/1e6)
	if r.Sent > 0 && r.Received != r.Sent {
		fmt.Fprintf(w, ", received %d of %d", r.Received, r.Sent)
	}
	if len(r.Lat) > 0 {
		what := "one-way latency under load"
		if r.Pattern == "reqrep" {
			what = "round trip"
		}
		fmt.Fprintf(w, ", %s p50=%v p90=%v p99=%v", what,
			pct(r.Lat, 50).Round(100*time.Nanosecond), pct(r.Lat, 90).Round(100*time.Nanosecond),
			pct(r.Lat, 99).Round(100*time.Nanosecond))
	}
	fmt.Fprintln(w)
}

// Socket runs the socket benchmark of pattern (pushpull, pubsub or reqrep)
// as o says and prints its figures to w.
func Socket(ctx context.Context, w io.Writer, pattern string, o *SocketOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Count < 2 {
		return errors.New("--count must be at least 2")
	}
	if o.Size < 0 {
		return errors.New("--size must not be negative")
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg := socket.Config{SendHWM: o.HWM, RecvHWM: o.HWM, Linger: 10 * time.Second, PubNoDrop: o.NoDrop}
	if o.Separate && (o.Bind != "" || o.Connect != "" || o.Role != "") {
		return errors.New("--separate picks its own endpoint and roles")
	}
	if o.Bind != "" || o.Connect != "" || o.Role != "" {
		if (o.Bind == "") == (o.Connect == "") {
			return errors.New("separate-process mode needs exactly one of --bind and --connect")
		}
		if o.Role != "send" && o.Role != "recv" {
			return errors.New("separate-process mode needs --role send or --role recv")
		}
		res, err := benchOneEnd(ctx, pattern, o, cfg)
		if err != nil || (o.Role == "send" && pattern != "reqrep") || (o.Role == "recv" && pattern == "reqrep") {
			if err == nil && !o.JSON {
				fmt.Fprintf(w, "%s: %s end done\n", pattern, o.Role)
			}
			return err
		}
		if o.JSON {
			return json.NewEncoder(w).Encode(res)
		}
		res.print(w)
		return nil
	}
	if o.Rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	// With several rounds, ours and libzmq's run alternately, so that both
	// see the same machine, and the medians are printed at the end.
	var rates, ratios, latRatios []float64
	for round := 1; round <= o.Rounds; round++ {
		if o.Rounds > 1 {
			fmt.Fprintf(w, "round %d of %d\n", round, o.Rounds)
		}
		var res benchResult
		var err error
		if o.Separate {
			res, err = benchSeparate(ctx, pattern, o, cfg)
		} else {
			res, err = benchInProcess(ctx, pattern, o, cfg)
		}
		if err != nil {
			return err
		}
		res.print(w)
		rates = append(rates, res.rate())
		if o.Libzmq == "" {
			continue
		}
		lz, err := runLibzmqPerf(ctx, pattern, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s size=%d (%s): %.0f msg/s, %.1f MB/s", pattern, lz.Transport, lz.Size, lz.Impl, lz.MsgsPerS, lz.MBPerS)
		if pattern == "reqrep" {
			fmt.Fprintf(w, ", round trip p50=%.1fµs p90=%.1fµs p99=%.1fµs", lz.P50us, lz.P90us, lz.P99us)
		}
		fmt.Fprintln(w)
		if lz.MsgsPerS > 0 {
			ratios = append(ratios, res.rate()/lz.MsgsPerS)
			fmt.Fprintf(w, "ratio fastmq/libzmq msg/s: %.2f\n", ratios[len(ratios)-1])
		}
		if pattern == "reqrep" && lz.P50us > 0 {
			latRatios = append(latRatios, float64(pct(res.Lat, 50))/float64(time.Microsecond)/lz.P50us)
			fmt.Fprintf(w, "ratio fastmq/libzmq p50 round trip: %.2f\n", latRatios[len(latRatios)-1])
		}
	}
	if o.Rounds > 1 {
		fmt.Fprintf(w, "median of %d rounds: fastmq %.0f msg/s", o.Rounds, median(rates))
		if len(ratios) > 0 {
			fmt.Fprintf(w, ", ratio fastmq/libzmq msg/s %.2f (min %.2f, max %.2f)", median(ratios), slices.Min(ratios), slices.Max(ratios))
		}
		if len(latRatios) > 0 {
			fmt.Fprintf(w, ", ratio fastmq/libzmq p50 round trip %.2f", median(latRatios))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// kindConfig returns cfg for a socket of kind k: --no-drop is the
// publisher's option only.
func kindConfig(cfg socket.Config, k socket.Kind) socket.Config {
	cfg.PubNoDrop = cfg.PubNoDrop && k == socket.Pub
	return cfg
}

// median returns the median of v (v is not empty).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// benchEndpoint picks a fresh endpoint for one-process runs.
func benchEndpoint(transport string) (ep string, cleanup func(), err error) {
	switch transport {
	case "tcp":
		return "tcp://127.0.0.1:0", func() {}, nil
	case "ipc":
		dir, err := os.MkdirTemp("", "fastmq-bench-")
		if err != nil {
			return "", nil, err
		}
		return "ipc://" + filepath.Join(dir, "bench.sock"), func() { os.RemoveAll(dir) }, nil
	case "inproc":
		return "inproc://fastmq-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36), func() {}, nil
	}
	return "", nil, fmt.Errorf("unknown transport %q (want tcp, ipc or inproc)", transport)
}

// stampEvery is how often a sent message carries its send time: reading
// the clock for every message would cost the sender more than the send.
const stampEvery = 64

// unstamped marks a message that carries no send time (0 marks warm-up
// messages).
const unstamped = 1

// stamp returns a new payload whose first 8 bytes hold the send time for
// every stampEvery-th message (i counts from 0), unstamped otherwise.
func stamp(size, i int) []byte {
	p := make([]byte, size)
	if size >= 8 {
		ts := uint64(unstamped)
		if i%stampEvery == 0 {
			ts = uint64(time.Now().UnixNano())
		}
		binary.LittleEndian.PutUint64(p, ts)
	}
	return p
}

// stampAge returns how long ago p was stamped, if it was.
func stampAge(p []byte, now time.Time) (time.Duration, bool) {
	if len(p) < 8 {
		return 0, false
	}
	ts := int64(binary.LittleEndian.Uint64(p))
	if ts == 0 || ts == unstamped {
		return 0, false
	}
	return time.Duration(now.UnixNano() - ts), true
}

const benchRecvTimeout = 10 * time.Second

func recvWithin(ctx context.Context, s *socket.Socket, d time.Duration) (socket.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m, err := s.Recv(rctx)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return m, fmt.Errorf("no message for %v: %w", d, rctx.Err())
	}
	return m, err
}

// deadline is a context with a timeout and its cancel function.
type deadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newDeadline(parent context.Context, d time.Duration) deadline {
	ctx, cancel := context.WithTimeout(parent, d)
	return deadline{ctx, cancel}
}

// receiveStream receives count stamped messages and times first to last.
// With idle > 0 it stops early when nothing arrives for idle (pubsub drops).
// Messages with a zero stamp (warm-up) are skipped.
//
// The loop keeps the harness out of the measurement, as libzmq's local_thr
// does: one receive deadline is shared by a run of messages (renewed every
// 1024 messages, or when it ends while messages still flow), and the clock
// is read for one message in 64 (the latency sample) and at the ends.
func receiveStream(ctx context.Context, s *socket.Socket, pattern string, o *SocketOptions, idle time.Duration) (benchResult, error) {
	res := benchResult{Pattern: pattern, Transport: o.Transport, Size: o.Size}
	lat := make([]time.Duration, 0, o.Count/64+1)
	var first, lastSeen time.Time
	wait := benchRecvTimeout
	dl := newDeadline(ctx, wait)
	defer func() { dl.cancel() }()
	sinceRenew := 0
	idled := false
	for res.Received < o.Count {
		if sinceRenew >= 1024 {
			dl.cancel()
			dl = newDeadline(ctx, wait)
			sinceRenew = 0
		}
		m, err := s.Recv(dl.ctx)
		if err != nil {
			if ctx.Err() == nil && dl.ctx.Err() != nil {
				now := time.Now()
				if res.Received > 0 && now.Sub(lastSeen) < wait {
					// The shared deadline ended while messages still flow.
					dl.cancel()
					dl = newDeadline(ctx, wait)
					sinceRenew = 0
					continue
				}
				if idle > 0 && res.Received > 0 {
					idled = true
					break
				}
				err = fmt.Errorf("no message for %v: %w", wait, dl.ctx.Err())
			}
			return res, fmt.Errorf("%s receive after %d messages: %w", pattern, res.Received, err)
		}
		sinceRenew++
		if len(m.Frames) != 1 {
			return res, fmt.Errorf("%s: got %d frames, want 1", pattern, len(m.Frames))
		}
		var ts uint64
		if len(m.Frames[0]) >= 8 {
			ts = binary.LittleEndian.Uint64(m.Frames[0])
		}
		if o.Size >= 8 && ts == 0 {
			continue // warm-up
		}
		// The clock is read for stamped messages (and now and then for
		// unstamped ones: sizes under 8 bytes carry no stamp).
		sample := res.Received == 0 || ts > unstamped || res.Received%stampEvery == 0
		var now time.Time
		if sample {
			now = time.Now()
			lastSeen = now
		}
		age, ok := stampAge(m.Frames[0], now)
		if res.Received == 0 {
			first = now
			if idle > 0 {
				wait = idle
			}
		}
		res.Received++
		if ok {
			lat = append(lat, age)
		}
	}
	last := time.Now()
	if idled {
		last = lastSeen // not the idle wait that ended the run
	}
	// Like libzmq's local_thr: the clock runs from the first message to the
	// last, so count-1 messages are timed.
	res.Elapsed = last.Sub(first)
	res.Timed = res.Received - 1
	slices.Sort(lat)
	res.Lat = lat
	return res, nil
}

func sendStream(ctx context.Context, s *socket.Socket, o *SocketOptions) error {
	for i := 0; i < o.Count; i++ {
		if err := s.Send(ctx, socket.NewMsg(stamp(o.Size, i))); err != nil {
			return fmt.Errorf("send message %d: %w", i, err)
		}
	}
	return nil
}

// sendWarmup publishes unstamped messages until stop is closed or d passes.
func sendWarmup(ctx context.Context, s *socket.Socket, size int, stop <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	p := make([]byte, max(size, 8))[:size]
	for time.Now().Before(deadline) {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := s.Send(ctx, socket.NewMsg(bytes.Clone(p))); err != nil {
			return fmt.Errorf("send warm-up: %w", err)
		}
		if stop == nil {
			continue
		}
		// Pace the warm-up so the queue does not fill with it.
		t := time.NewTimer(time.Millisecond)
		select {
		case <-stop:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	if stop != nil {
		return errors.New("subscriber did not receive any warm-up message")
	}
	return nil
}

func roundTrips(ctx context.Context, s *socket.Socket, o *SocketOptions) (benchResult, error) {
	res := benchResult{Pattern: "reqrep", Transport: o.Transport, Size: o.Size}
	lat := make([]time.Duration, 0, o.Count)
	p := make([]byte, o.Size)
	start := time.Now()
	for i := 0; i < o.Count; i++ {
		t := time.Now()
		if err := s.Send(ctx, socket.NewMsg(bytes.Clone(p))); err != nil {
			return res, fmt.Errorf("request %d: %w", i, err)
		}
		if _, err := recvWithin(ctx, s, benchRecvTimeout); err != nil {
			return res, fmt.Errorf("reply %d: %w", i, err)
		}
		lat = append(lat, time.Since(t))
	}
	res.Elapsed = time.Since(start)
	res.Received = o.Count
	res.Timed = o.Count
	slices.Sort(lat)
	res.Lat = lat
	return res, nil
}

func echoReplies(ctx context.Context, s *socket.Socket, count int) error {
	for i := 0; i < count; i++ {
		m, err := recvWithin(ctx, s, benchRecvTimeout)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if err := s.Send(ctx, m); err != nil {
			return fmt.Errorf("reply %d: %w", i, err)
		}
	}
	return nil
}

func benchKinds(pattern string) (send, recv socket.Kind, err error) {
	switch pattern {
	case "pushpull":
		return socket.Push, socket.Pull, nil
	case "pubsub":
		return socket.Pub, socket.Sub, nil
	case "reqrep":
		return socket.Req, socket.Rep, nil
	}
	return 0, 0, fmt.Errorf("unknown pattern %q", pattern)
}

func benchInProcess(ctx context.Context, pattern string, o *SocketOptions, cfg socket.Config) (benchResult, error) {
	sk, rk, err := benchKinds(pattern)
	if err != nil {
		return benchResult{}, err
	}
	ep, cleanup, err := benchEndpoint(o.Transport)
	if err != nil {
		return benchResult{}, err
	}
	defer cleanup()
	rs, err := socket.New(rk, kindConfig(cfg, rk))
	if err != nil {
		return benchResult{}, err
	}
	defer rs.Close()
	bound, err := rs.Bind(ep)
	if err != nil {
		return benchResult{}, fmt.Errorf("bind %s: %w", ep, err)
	}
	if rk == socket.Sub {
		if err := rs.Subscribe(nil); err != nil {
			return benchResult{}, err
		}
	}
	ss, err := socket.New(sk, kindConfig(cfg, sk))
	if err != nil {
		return benchResult{}, err
	}
	defer ss.Close()
	if err := ss.Connect(bound); err != nil {
		return benchResult{}, fmt.Errorf("connect %s: %w", bound, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	var res benchResult
	switch pattern {
	case "pushpull":
		g.Go(func() error { return sendStream(gctx, ss, o) })
		g.Go(func() (err error) { res, err = receiveStream(gctx, rs, pattern, o, 0); return err })
	case "pubsub":
		if o.Size < 8 {
			return res, errors.New("pubsub needs --size of at least 8 (the send time)")
		}
		ready := make(chan struct{})
		g.Go(func() error {
			// Slow joiner: publish unstamped messages until the subscriber
			// has one, then the measured stream.
			if err := sendWarmup(gctx, ss, o.Size, ready, benchRecvTimeout); err != nil {
				return err
			}
			return sendStream(gctx, ss, o)
		})
		g.Go(func() (err error) {
			if _, err := recvWithin(gctx, rs, benchRecvTimeout); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
			close(ready)
			r, err := receiveStream(gctx, rs, pattern, o, time.Second)
			r.Sent = o.Count
			res = r
			return err
		})
	case "reqrep":
		g.Go(func() error { return echoReplies(gctx, rs, o.Count) })
		g.Go(func() (err error) { res, err = roundTrips(gctx, ss, o); return err })
	}
	err = g.Wait()
	return res, err
}

// benchOneEnd runs one end of a separate-process benchmark.
func benchOneEnd(ctx context.Context, pattern string, o *SocketOptions, cfg socket.Config) (benchResult, error) {
	sk, rk, err := benchKinds(pattern)
	if err != nil {
		return benchResult{}, err
	}
	kind := sk
	if o.Role == "recv" {
		kind = rk
	}
	s, err := socket.New(kind, kindConfig(cfg, kind))
	if err != nil {
		return benchResult{}, err
	}
	defer s.Close()
	if o.Bind != "" {
		got, err := s.Bind(o.Bind)
		if err != nil {
			return benchResult{}, fmt.Errorf("bind %s: %w", o.Bind, err)
		}
		fmt.Fprintln(os.Stderr, "bound", got)
	} else if err := s.Connect(o.Connect); err != nil {
		return benchResult{}, fmt.Errorf("connect %s: %w", o.Connect, err)
	}
	if kind == socket.Sub {
		if err := s.Subscribe(nil); err != nil {
			return benchResult{}, err
		}
	}
	if scheme, _, ok := strings.Cut(o.Bind+o.Connect, "://"); ok {
		o.Transport = scheme
	}
	switch {
	case pattern == "reqrep" && o.Role == "send":
		return roundTrips(ctx, s, o)
	case pattern == "reqrep":
		return benchResult{}, echoReplies(ctx, s, o.Count)
	case o.Role == "recv":
		idle := time.Duration(0)
		if pattern == "pubsub" {
			idle = time.Second
		}
		r, err := receiveStream(ctx, s, pattern, o, idle)
		return r, err
	default:
		if pattern == "pubsub" {
			if o.Size < 8 {
				return benchResult{}, errors.New("pubsub needs --size of at least 8 (the send time)")
			}
			if err := sendWarmup(ctx, s, o.Size, nil, o.Warmup); err != nil {
				return benchResult{}, err
			}
		}
		return benchResult{}, sendStream(ctx, s, o)
	}
}

// benchSeparate runs the receiving end (PULL, SUB, REP) in a child process
// of this command and the other end here, like libzmq's
// local_thr/remote_thr pairs.
func benchSeparate(ctx context.Context, pattern string, o *SocketOptions, cfg socket.Config) (benchResult, error) {
	ep, cleanup, err := benchEndpoint(o.Transport)
	if err != nil {
		return benchResult{}, err
	}
	defer cleanup()
	if o.Transport == "inproc" {
		return benchResult{}, errors.New("--separate needs tcp or ipc")
	}
	exe, err := os.Executable()
	if err != nil {
		return benchResult{}, err
	}
	child := exec.CommandContext(ctx, exe, "bench", pattern, "--role", "recv", "--bind", ep,
		"--count", strconv.Itoa(o.Count), "--size", strconv.Itoa(o.Size), "--hwm", strconv.Itoa(o.HWM), "--json")
	if o.NoDrop {
		child.Args = append(child.Args, "--no-drop")
	}
	if o.CPUProfile != "" {
		child.Args = append(child.Args, "--cpuprofile", o.CPUProfile+".recv")
	}
	var out bytes.Buffer
	child.Stdout = &out
	stderr, err := child.StderrPipe()
	if err != nil {
		return benchResult{}, err
	}
	if err := child.Start(); err != nil {
		return benchResult{}, fmt.Errorf("start receiving end: %w", err)
	}
	bound := make(chan string, 1)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if ep, ok := strings.CutPrefix(sc.Text(), "bound "); ok {
				select {
				case bound <- ep:
				default:
				}
				continue
			}
			fmt.Fprintln(os.Stderr, sc.Text())
		}
	}()
	finish := func() error {
		<-stderrDone
		return child.Wait()
	}
	var connectTo string
	select {
	case connectTo = <-bound:
	case <-stderrDone:
		return benchResult{}, fmt.Errorf("receiving end exited before binding: %v", finish())
	case <-time.After(benchRecvTimeout):
		child.Process.Kill()
		finish()
		return benchResult{}, errors.New("receiving end did not bind")
	}
	so := *o
	so.Role, so.Connect, so.Bind = "send", connectTo, ""
	res, err := benchOneEnd(ctx, pattern, &so, cfg)
	if err != nil {
		child.Process.Kill()
		finish()
		return res, err
	}
	if err := finish(); err != nil {
		return res, fmt.Errorf("receiving end: %w", err)
	}
	if pattern != "reqrep" {
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			return res, fmt.Errorf("receiving end output %q: %w", out.Bytes(), err)
		}
		res.Sent = o.Count
	}
	res.Transport = o.Transport + ", separate processes"
	return res, nil
}

// libzmqFigure is perf.py's JSON line.
type libzmqFigure struct {
	Impl      string  `json:"impl"`
	Pattern   string  `json:"pattern"`
	Transport string  `json:"transport"`
	Size      int     `json:"size"`
	Count     int     `json:"count"`
	MsgsPerS  float64 `json:"msgs_per_s"`
	MBPerS    float64 `json:"mb_per_s"`
	P50us     float64 `json:"p50_us"`
	P90us     float64 `json:"p90_us"`
	P99us     float64 `json:"p99_us"`
}

func runLibzmqPerf(ctx context.Context, pattern string, o *SocketOptions) (libzmqFigure, error) {
	var kind string
	switch pattern {
	case "pushpull":
		kind = "thr"
	case "reqrep":
		kind = "lat"
	case "pubsub":
		kind = "pub"
	default:
		return libzmqFigure{}, fmt.Errorf("no libzmq figure for %s", pattern)
	}
	tr := o.Transport
	if tr != "tcp" && tr != "ipc" {
		return libzmqFigure{}, fmt.Errorf("no libzmq figure over %s (tcp and ipc only)", tr)
	}
	args := []string{o.Libzmq, kind, "--transport", tr, "--size", strconv.Itoa(o.Size), "--count", strconv.Itoa(o.Count)}
	if o.Native {
		args = append(args, "--native")
	}
	c := exec.CommandContext(ctx, o.Python, args...)
	c.Stderr = os.Stderr
	out, err := c.Output()
	if err != nil {
		return libzmqFigure{}, fmt.Errorf("run %s: %w", o.Libzmq, err)
	}
	var fig libzmqFigure
	if err := json.Unmarshal(bytes.TrimSpace(out), &fig); err != nil {
		return fig, fmt.Errorf("parse %s output %q: %w", o.Libzmq, out, err)
	}
	return fig, nil
}
