package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fastmq/fastmq/socket"
)

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
	rcfg, err := endConfig(o, cfg, rk, true)
	if err != nil {
		return benchResult{}, err
	}
	rs, err := socket.New(rk, rcfg)
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
	scfg, err := endConfig(o, cfg, sk, false)
	if err != nil {
		return benchResult{}, err
	}
	ss, err := socket.New(sk, scfg)
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
	kcfg, err := endConfig(o, cfg, kind, o.Role == "recv")
	if err != nil {
		return benchResult{}, err
	}
	s, err := socket.New(kind, kcfg)
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
	if o.Curve {
		child.Args = append(child.Args, "--curve")
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
	Mechanism string  `json:"mechanism"`
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
	if o.Curve {
		args = append(args, "--curve")
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
