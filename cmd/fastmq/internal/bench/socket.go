package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/fastmq/fastmq/internal/benchkit"
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
	// Curve makes both ends CURVE: the receiving end (PULL, SUB, REP) the
	// server, the other its client; perf.py gets --curve too.
	Curve bool
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
			benchkit.Percentile(r.Lat, 0.50).Round(100*time.Nanosecond), benchkit.Percentile(r.Lat, 0.90).Round(100*time.Nanosecond),
			benchkit.Percentile(r.Lat, 0.99).Round(100*time.Nanosecond))
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
	stop, err := cpuProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	cfg := socket.Config{SendHWM: o.HWM, RecvHWM: o.HWM, Linger: 10 * time.Second, PubNoDrop: o.NoDrop}
	if o.Curve && o.Transport == "inproc" {
		return errors.New("--curve needs tcp or ipc (inproc has no security handshake)")
	}
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
		res.Transport += mechanism(o)
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
	var rates, ratios, latRatios, tailRatios []float64
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
		res.Transport += mechanism(o)
		res.print(w)
		rates = append(rates, res.rate())
		if o.Libzmq == "" {
			continue
		}
		lz, err := runLibzmqPerf(ctx, pattern, o)
		if err != nil {
			return err
		}
		tr := lz.Transport
		if lz.Mechanism != "" && lz.Mechanism != "null" {
			tr += ", " + lz.Mechanism
		}
		fmt.Fprintf(w, "%s %s size=%d (%s): %.0f msg/s, %.1f MB/s", pattern, tr, lz.Size, lz.Impl, lz.MsgsPerS, lz.MBPerS)
		if pattern == "reqrep" {
			fmt.Fprintf(w, ", round trip p50=%.1fµs p90=%.1fµs p99=%.1fµs", lz.P50us, lz.P90us, lz.P99us)
		}
		fmt.Fprintln(w)
		if lz.MsgsPerS > 0 {
			ratios = append(ratios, res.rate()/lz.MsgsPerS)
			fmt.Fprintf(w, "ratio fastmq/libzmq msg/s: %.2f\n", ratios[len(ratios)-1])
		}
		if pattern == "reqrep" && lz.P50us > 0 {
			latRatios = append(latRatios, float64(benchkit.Percentile(res.Lat, 0.50))/float64(time.Microsecond)/lz.P50us)
			fmt.Fprintf(w, "ratio fastmq/libzmq p50 round trip: %.2f", latRatios[len(latRatios)-1])
			if lz.P99us > 0 {
				tailRatios = append(tailRatios, float64(benchkit.Percentile(res.Lat, 0.99))/float64(time.Microsecond)/lz.P99us)
				fmt.Fprintf(w, ", p99: %.2f", tailRatios[len(tailRatios)-1])
			}
			fmt.Fprintln(w)
		}
	}
	if o.Rounds > 1 {
		fmt.Fprintf(w, "median of %d rounds: fastmq %.0f msg/s", o.Rounds, benchkit.Median(rates))
		if len(ratios) > 0 {
			fmt.Fprintf(w, ", ratio fastmq/libzmq msg/s %.2f (min %.2f, max %.2f)", benchkit.Median(ratios), slices.Min(ratios), slices.Max(ratios))
		}
		if len(latRatios) > 0 {
			fmt.Fprintf(w, ", ratio fastmq/libzmq p50 round trip %.2f (min %.2f, max %.2f)", benchkit.Median(latRatios), slices.Min(latRatios), slices.Max(latRatios))
		}
		if len(tailRatios) > 0 {
			fmt.Fprintf(w, ", p99 round trip %.2f (min %.2f, max %.2f)", benchkit.Median(tailRatios), slices.Min(tailRatios), slices.Max(tailRatios))
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
