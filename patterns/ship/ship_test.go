package ship_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/ship"
	"github.com/fastmq/fastmq/spool"
)

// childEnv makes the test binary run a shipper over the directory it names
// (see runChild), so that the kill -9 test kills a real process.
const childEnv = "FASTMQ_SHIP_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		if err := runChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "ship child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runChild ships dir/app.log into the spool dir/spool, with its positions
// in dir/positions, until SIGTERM.
func runChild(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool")})
	if err != nil {
		return err
	}
	s, err := ship.New(ship.Config{
		Spool:     l,
		Paths:     []string{filepath.Join(dir, "app.log")},
		StateFile: filepath.Join(dir, "positions"),
	})
	if err != nil {
		l.Close()
		return err
	}
	err = s.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, s.Close(), l.Close())
}

// spoolRecords opens the spool read-only and returns its record count, and
// with all set, every record's value.
func spoolRecords(t *testing.T, dir string, all bool) (uint64, []string) {
	t.Helper()
	l, err := spool.OpenReadOnly(spool.Config{Dir: dir})
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, spool.ErrNotSpool) {
		return 0, nil // the child has not created its spool yet
	}
	if err != nil {
		t.Fatalf("open spool: %v", err)
	}
	defer l.Close()
	next := l.NextOffset()
	if !all {
		return next, nil
	}
	r, err := l.NewReader(l.OldestOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var vals []string
	for r.Offset() < next {
		rec, err := r.Next(context.Background())
		if err != nil {
			t.Fatalf("read spool at %d: %v", r.Offset(), err)
		}
		vals = append(vals, string(rec.Value))
	}
	return next, vals
}

// TestKill9ShipsEachLineOnce proves that a shipper killed with SIGKILL
// mid-stream, again and again, and restarted, leaves every line of the file
// in the spool exactly once and in order: nothing it had appended (what a
// collector could already have pulled) is lost or appended again.
func TestKill9ShipsEachLineOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	f, err := os.OpenFile(filepath.Join(dir, "app.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written := 0
	write := func(n int) {
		w := bufio.NewWriter(f)
		for range n {
			fmt.Fprintf(w, "line %06d of the access log\n", written)
			written++
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// start runs a child shipper; wait returns its exit error.
	start := func() (c *exec.Cmd, wait func() error) {
		c = exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(), childEnv+"="+dir)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var werr error
		go func() {
			werr = c.Wait()
			close(done)
		}()
		t.Cleanup(func() {
			c.Process.Kill()
			<-done
		})
		return c, func() error { <-done; return werr }
	}

	// acked[i] is what the spool held when the i-th child was killed: lines
	// a collector may already have pulled, which must stay exactly as they
	// are.
	var acked []uint64
	for round := 0; round < 5; round++ {
		write(4000)
		c, wait := start()
		before, _ := spoolRecords(t, spoolDir, false)
		// Kill mid-stream, each round later: once this child has appended
		// its first batch, then after more and more batches, while lines
		// are left to ship.
		target := min(before+1+uint64(round*1500), uint64(written))
		testutil.WaitFor(t, fmt.Sprintf("round %d: the child appending", round), 30*time.Second, func() bool {
			n, _ := spoolRecords(t, spoolDir, false)
			return n >= target
		})
		c.Process.Signal(syscall.SIGKILL)
		wait()
		n, _ := spoolRecords(t, spoolDir, false)
		acked = append(acked, n)
	}
	write(1000)
	c, wait := start()
	testutil.WaitFor(t, "every line in the spool", 60*time.Second, func() bool {
		n, _ := spoolRecords(t, spoolDir, false)
		return n >= uint64(written)
	})
	c.Process.Signal(syscall.SIGTERM)
	if err := wait(); err != nil {
		t.Fatalf("child after SIGTERM: %v", err)
	}

	_, vals := spoolRecords(t, spoolDir, true)
	seen := make(map[string]int, len(vals))
	twice := 0
	for _, v := range vals {
		seen[v]++
		if seen[v] == 2 {
			twice++
		}
	}
	missing := 0
	for i := range written {
		if seen[fmt.Sprintf("line %06d of the access log", i)] == 0 {
			missing++
		}
	}
	t.Logf("wrote %d lines; spool held %v at the kills; %d records arrived, %d lines twice, %d missing", written, acked, len(vals), twice, missing)
	if twice > 0 || missing > 0 || len(vals) != written {
		t.Fatalf("after %d kills: %d records for %d lines, %d lines twice, %d missing", len(acked), len(vals), written, twice, missing)
	}
	for i, v := range vals {
		if want := fmt.Sprintf("line %06d of the access log", i); v != want {
			t.Fatalf("record %d is %q, want %q", i, v, want)
		}
	}
	for i, n := range acked {
		if n > uint64(len(vals)) {
			t.Fatalf("the spool held %d records at kill %d but %d at the end: appended records were lost", n, i+1, len(vals))
		}
	}
}

// TestSkipsLinesAppendedBeforeACrash covers the window between a batch
// being durable in the spool and the tailer's positions being committed:
// with the committed positions lost (the state file is gone, as after a
// crash right before its first commit), a restarted shipper reads the file
// from the start again and must not append its lines twice.
func TestSkipsLinesAppendedBeforeACrash(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	var lines []byte
	for i := 0; i < 50; i++ {
		lines = fmt.Appendf(lines, "line %d\n", i)
	}
	if err := os.WriteFile(logPath, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "positions")
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// run ships until the spool holds want records, then stops the shipper.
	run := func(want uint64) uint64 {
		t.Helper()
		s, err := ship.New(ship.Config{Spool: l, Paths: []string{logPath}, StateFile: state})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		testutil.WaitFor(t, fmt.Sprintf("%d records", want), 20*time.Second, func() bool { return l.NextOffset() >= want })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run ended with %v, want context.Canceled", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return l.NextOffset()
	}
	if got := run(50); got != 50 {
		t.Fatalf("first run shipped %d lines, want 50", got)
	}
	// The crash: the committed read positions are lost.
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "line 50\n")
	f.Close()
	if got := run(51); got != 51 {
		t.Fatalf("after a restart without positions the stream holds %d records, want 51 (no line twice)", got)
	}
}

// TestHeaders checks the header convention of the package doc: every
// record names its source, the last line of a file in a batch carries its
// position.
func TestHeaders(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	if err := os.WriteFile(logPath, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := ship.New(ship.Config{Spool: l, Paths: []string{logPath}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	testutil.WaitFor(t, "3 records", 0, func() bool { return l.NextOffset() >= 3 })
	cancel()
	<-done
	s.Close()
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for i, want := range []string{"a", "b", "c"} {
		rec, err := r.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range rec.Headers {
			got = append(got, h.Key+"="+string(h.Value))
		}
		wantH := []string{ship.HeaderSource + "=" + logPath}
		if i == 2 {
			wantH = append(wantH, fmt.Sprintf("%s=%d:%d:%d", ship.HeaderPosition, uint64(st.Dev), uint64(st.Ino), 6))
		}
		if string(rec.Value) != want || strings.Join(got, " ") != strings.Join(wantH, " ") {
			t.Fatalf("record %d: %q with headers %q, want %q with %q", i, rec.Value, got, want, wantH)
		}
	}
}

func TestConfigIsValidated(t *testing.T) {
	l, err := spool.Open(spool.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, cfg := range []ship.Config{
		{Paths: []string{"x"}},
		{Spool: l},
	} {
		if _, err := ship.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "ship: ") {
			t.Fatalf("New(%+v) = %v, want a ship: error", cfg, err)
		}
	}
}

// TestLifecycle checks Run and Close: a second Run while one is active is
// refused, Close stops the active Run (which returns ErrClosed) and is
// idempotent, and Run after Close returns ErrClosed.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "app.log")
	if err := os.WriteFile(logPath, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := ship.New(ship.Config{Spool: l, Paths: []string{logPath}, StateFile: filepath.Join(dir, "positions")})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	testutil.WaitFor(t, "the line shipped", 0, func() bool { return l.NextOffset() == 1 })
	if err := s.Run(context.Background()); !errors.Is(err, ship.ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, ship.ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ship.ErrClosed) {
		t.Fatalf("Run on a closed shipper: %v, want ErrClosed", err)
	}
}

// TestDamagedStateIdleFileNotReshipped reproduces the attack run's case: a
// file that has been idle while more than 8192 records of another file were
// shipped, then the positions file is damaged. The restarted shipper must
// not ship the idle file again from its start (it used to: its newest
// "pos" lay outside the read-back window).
func TestDamagedStateIdleFileNotReshipped(t *testing.T) {
	dir := t.TempDir()
	idle := filepath.Join(dir, "idle.log")
	busy := filepath.Join(dir, "busy.log")
	var b []byte
	for i := 0; i < 100; i++ {
		b = fmt.Appendf(b, "idle %d\n", i)
	}
	if err := os.WriteFile(idle, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "positions")
	l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "spool"), Sync: spool.SyncNone})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	run := func(want uint64, during func()) uint64 {
		t.Helper()
		s, err := ship.New(ship.Config{Spool: l, Paths: []string{idle, busy}, StateFile: state})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		if during != nil {
			testutil.WaitFor(t, "the idle file shipped", 20*time.Second, func() bool { return l.NextOffset() >= 100 })
			during()
		}
		testutil.WaitFor(t, fmt.Sprintf("%d records", want), 30*time.Second, func() bool { return l.NextOffset() >= want })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run ended with %v, want context.Canceled", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return l.NextOffset()
	}
	const busyLines = 9000 // more than the read-back window
	got := run(100+busyLines, func() {
		var bb []byte
		for i := 0; i < busyLines; i++ {
			bb = fmt.Appendf(bb, "busy %d\n", i)
		}
		if err := os.WriteFile(busy, bb, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if got != 100+busyLines {
		t.Fatalf("first run shipped %d lines, want %d", got, 100+busyLines)
	}
	// The positions file is damaged.
	if err := os.WriteFile(state, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(busy, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "busy %d\n", busyLines)
	f.Close()
	if got := run(100+busyLines+1, nil); got != 100+busyLines+1 {
		t.Fatalf("after the damaged positions file the stream holds %d records, want %d: lines were shipped twice", got, 100+busyLines+1)
	}
	if _, err := os.Stat(state + ".corrupt"); err != nil {
		t.Fatalf("the damaged positions file was not kept aside: %v", err)
	}
}

// TestFullDiskWaitsForSpace: a spool whose disk is full refuses the
// shipper's appends; the shipper keeps running (before: Run ended with
// the append's error and the command exited) and, once space returns,
// ships every line written meanwhile exactly once, in order.
func TestFullDiskWaitsForSpace(t *testing.T) {
	dir := t.TempDir()
	disk := testutil.SmallDisk(t, "4m")
	logPath := filepath.Join(dir, "app.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written := 0
	write := func(n int) {
		for range n {
			fmt.Fprintf(f, "line %06d %s\n", written, strings.Repeat("x", 200))
			written++
		}
	}
	l, err := spool.Open(spool.Config{Dir: filepath.Join(disk, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := ship.New(ship.Config{Spool: l, Paths: []string{logPath}, StateFile: filepath.Join(dir, "positions")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	write(100)
	testutil.WaitFor(t, "100 records", 20*time.Second, func() bool { return l.NextOffset() >= 100 })

	filler := testutil.FillDisk(t, disk)
	write(8000) // about 1.7 MiB: more than the space reserved ahead of the writer
	// The shipper stalls short of the end: its appends are refused.
	last, stable := l.NextOffset(), time.Now()
	testutil.WaitFor(t, "the shipper refused", 20*time.Second, func() bool {
		if n := l.NextOffset(); n != last {
			last, stable = n, time.Now()
		}
		return time.Since(stable) > 300*time.Millisecond
	})
	if last >= uint64(written) {
		t.Fatalf("all %d lines shipped to a full disk", written)
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended on a full disk: %v", err)
	default:
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// What the disk can hold now: the shipper catches up on its own.
	testutil.WaitFor(t, "every line shipped", 30*time.Second, func() bool { return l.NextOffset() >= uint64(written) })
	select {
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	default:
	}
	seen := make(map[string]bool)
	next := 0
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for uint64(next) < l.NextOffset() {
		rec, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v := string(rec.Value)
		if seen[v] {
			t.Fatalf("line shipped twice: %.12s", v)
		}
		seen[v] = true
		next++
	}
	if len(seen) != written {
		t.Fatalf("%d distinct lines shipped, %d written", len(seen), written)
	}
}
