package tail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fastmq/fastmq/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitDeadline bounds every wait on a condition.
const waitDeadline = 30 * time.Second

// got is a line as received by a test sink (Text copied).
type got struct {
	text  string
	pos   Position
	split bool
}

// sink collects lines delivered by Run.
type sink struct {
	mu    sync.Mutex
	lines []got
	fail  error // returned by the handler while set
}

func (s *sink) handle(lines []Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, l := range lines {
		s.lines = append(s.lines, got{text: string(l.Text), pos: l.Pos, split: l.Split})
	}
	return nil
}

func (s *sink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.lines))
	for i, l := range s.lines {
		out[i] = l.text
	}
	return out
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

func (s *sink) waitCount(t testing.TB, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%d lines", n), waitDeadline, func() bool { return s.count() >= n })
}

// runner runs a Tailer in the background.
type runner struct {
	tl     *Tailer
	s      *sink
	cancel context.CancelFunc
	errc   chan error
	once   sync.Once
	err    error
}

func start(t testing.TB, tl *Tailer) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{tl: tl, s: &sink{}, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- tl.Run(ctx, r.s.handle) }()
	t.Cleanup(func() { r.stop(); tl.Close() })
	return r
}

// stop cancels Run and returns its error.
func (r *runner) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.errc
	})
	return r.err
}

func newTailer(t testing.TB, cfg Config) *Tailer {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	tl, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { tl.Close() })
	return tl
}

// waitPolls waits until the tailer has completed n more poll rounds.
func waitPolls(t testing.TB, tl *Tailer, n uint64) {
	t.Helper()
	target := tl.polls.Load() + n
	testutil.WaitFor(t, "poll rounds", waitDeadline, func() bool { return tl.polls.Load() >= target })
}

func appendFile(t testing.TB, name, data string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// numbered returns lines "<prefix>-<i>\n" for i in [from, to).
func numbered(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s-%d\n", prefix, i)
	}
	return b.String()
}

func wantLines(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func equalLines(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d\ngot:  %q\nwant: %q", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("line %d: got %q, want %q\ngot:  %q", i, got[i], want[i], got)
		}
	}
}

func TestAppendAndRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("a", 0, 10))
	tl := newTailer(t, Config{Paths: []string{p}, MaxBatchLines: 3})
	r := start(t, tl)
	r.s.waitCount(t, 10)
	appendFile(t, p, numbered("a", 10, 25))
	r.s.waitCount(t, 25)
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	equalLines(t, r.s.texts(), wantLines("a", 0, 25))
	size := int64(len(numbered("a", 0, 25)))
	pos := tl.Positions()
	if len(pos) != 1 || pos[0].Offset != size || pos[0].Path != p {
		t.Fatalf("positions %+v, want one at offset %d", pos, size)
	}
	last := r.s.lines[len(r.s.lines)-1].pos
	if last != pos[0] {
		t.Fatalf("last line position %+v != Positions %+v", last, pos[0])
	}
}

func TestPartialLineHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, "first\nabc")
	tl := newTailer(t, Config{Paths: []string{p}})
	r := start(t, tl)
	r.s.waitCount(t, 1)
	waitPolls(t, tl, 3)
	equalLines(t, r.s.texts(), []string{"first"})
	if pos := tl.Positions(); pos[0].Offset != 6 {
		t.Fatalf("offset %d, want 6 (partial line not handled)", pos[0].Offset)
	}
	appendFile(t, p, "def\n")
	r.s.waitCount(t, 2)
	equalLines(t, r.s.texts(), []string{"first", "abcdef"})
}

func TestCRLF(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, "a\r\nb\rc\r\n\r\n\n")
	tl := newTailer(t, Config{Paths: []string{p}})
	r := start(t, tl)
	r.s.waitCount(t, 4)
	equalLines(t, r.s.texts(), []string{"a", "b\rc", "", ""})
}

func TestLongLinesSplit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	long := strings.Repeat("x", 25)
	exact := strings.Repeat("y", 10)
	appendFile(t, p, long+"\n"+exact+"\r\n"+"short\n")
	tl := newTailer(t, Config{Paths: []string{p}, MaxLineBytes: 10})
	r := start(t, tl)
	r.s.waitCount(t, 5)
	r.stop()
	equalLines(t, r.s.texts(), []string{"xxxxxxxxxx", "xxxxxxxxxx", "xxxxx", exact, "short"})
	wantSplit := []bool{true, true, false, false, false}
	wantOff := []int64{10, 20, 26, 38, 44}
	for i, l := range r.s.lines {
		if l.split != wantSplit[i] || l.pos.Offset != wantOff[i] {
			t.Errorf("line %d: split %v offset %d, want %v %d", i, l.split, l.pos.Offset, wantSplit[i], wantOff[i])
		}
	}
}

func TestLongLineBoundedMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, strings.Repeat("z", 300<<10)+"\n")
	tl := newTailer(t, Config{Paths: []string{p}, MaxLineBytes: 100 << 10})
	r := start(t, tl)
	r.s.waitCount(t, 3)
	r.stop()
	for i, l := range r.s.lines {
		if len(l.text) != 100<<10 || l.split != (i < 2) {
			t.Errorf("piece %d: %d bytes split %v", i, len(l.text), l.split)
		}
	}
	if n := cap(tl.fs[0].cur.buf); n > 100<<10+2 {
		t.Errorf("read buffer grew to %d bytes", n)
	}
}

func TestRenameRotationLateWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(f *os.File, s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(w, numbered("old", 0, 100))
	tl := newTailer(t, Config{Paths: []string{p}, RotateGrace: time.Hour})
	r := start(t, tl)
	r.s.waitCount(t, 100)

	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	write(w, numbered("old", 100, 150)) // the writer has not reopened yet
	waitPolls(t, tl, 2)
	nw, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	write(nw, numbered("new", 0, 50))
	write(w, numbered("old", 150, 160)) // a straggler after the new file exists
	r.s.waitCount(t, 210)
	waitPolls(t, tl, 3)
	r.stop()

	var old, nu []string
	for _, s := range r.s.texts() {
		if strings.HasPrefix(s, "old-") {
			old = append(old, s)
		} else {
			nu = append(nu, s)
		}
	}
	equalLines(t, old, wantLines("old", 0, 160))
	equalLines(t, nu, wantLines("new", 0, 50))
	pos := tl.Positions()
	if len(pos) != 2 {
		t.Fatalf("positions %+v, want the draining old file and the new one", pos)
	}
}

func TestRotatedFileClosedAfterGrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("old", 0, 5)+"tail-without-newline")
	tl := newTailer(t, Config{Paths: []string{p}, RotateGrace: 20 * time.Millisecond})
	r := start(t, tl)
	r.s.waitCount(t, 5)
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, numbered("new", 0, 5))
	r.s.waitCount(t, 11)
	testutil.WaitFor(t, "old file closed", waitDeadline, func() bool { return len(tl.Positions()) == 1 })
	r.stop()
	// The unterminated last line of the old file is delivered when the old
	// file is finished, after RotateGrace: after lines of the new file.
	got := withoutLast(t, r.s.texts(), "tail-without-newline", 5)
	equalLines(t, got, append(wantLines("old", 0, 5), wantLines("new", 0, 5)...))
	pos := tl.Positions()
	if pos[0].Offset != int64(len(numbered("new", 0, 5))) {
		t.Fatalf("position %+v", pos[0])
	}
}

// withoutLast checks that lines holds s exactly once, at an index of at
// least after, and returns lines without it.
func withoutLast(t testing.TB, lines []string, s string, after int) []string {
	t.Helper()
	var out []string
	found := 0
	for i, l := range lines {
		if l == s {
			found++
			if i < after {
				t.Fatalf("%q delivered at %d, before the %d lines preceding it", s, i, after)
			}
			continue
		}
		out = append(out, l)
	}
	if found != 1 {
		t.Fatalf("%q delivered %d times: %q", s, found, lines)
	}
	return out
}

func TestCopyTruncate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("before", 0, 50))
	tl := newTailer(t, Config{Paths: []string{p}})
	r := start(t, tl)
	r.s.waitCount(t, 50)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".1", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, numbered("after", 0, 10))
	r.s.waitCount(t, 60)
	waitPolls(t, tl, 3)
	r.stop()
	equalLines(t, r.s.texts(), append(wantLines("before", 0, 50), wantLines("after", 0, 10)...))
}

func TestDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("one", 0, 5))
	tl := newTailer(t, Config{Paths: []string{p}, RotateGrace: 10 * time.Millisecond})
	r := start(t, tl)
	r.s.waitCount(t, 5)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "deleted file closed", waitDeadline, func() bool { return len(tl.Positions()) == 0 })
	appendFile(t, p, numbered("two", 0, 5))
	r.s.waitCount(t, 10)
	r.stop()
	equalLines(t, r.s.texts(), append(wantLines("one", 0, 5), wantLines("two", 0, 5)...))
}

func TestFileAppearsLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "later.log")
	tl := newTailer(t, Config{Paths: []string{p}, StartAtEnd: true})
	r := start(t, tl)
	waitPolls(t, tl, 2)
	appendFile(t, p, numbered("l", 0, 3))
	r.s.waitCount(t, 3)
	r.stop()
	equalLines(t, r.s.texts(), wantLines("l", 0, 3))
}

func TestStartAtEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("skip", 0, 5)+"in-")
	tl := newTailer(t, Config{Paths: []string{p}, StartAtEnd: true})
	r := start(t, tl)
	appendFile(t, p, "progress\n"+numbered("keep", 0, 3))
	r.s.waitCount(t, 4)
	waitPolls(t, tl, 2)
	r.stop()
	equalLines(t, r.s.texts(), append([]string{"in-progress"}, wantLines("keep", 0, 3)...))
}

func TestMultiplePaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	appendFile(t, a, numbered("a", 0, 2000))
	appendFile(t, b, numbered("b", 0, 2000))
	tl := newTailer(t, Config{Paths: []string{a, b}, MaxBatchLines: 100})
	r := start(t, tl)
	r.s.waitCount(t, 4000)
	r.stop()
	var ga, gb []string
	for _, l := range r.s.lines {
		if l.pos.Path == a {
			ga = append(ga, l.text)
		} else {
			gb = append(gb, l.text)
		}
	}
	equalLines(t, ga, wantLines("a", 0, 2000))
	equalLines(t, gb, wantLines("b", 0, 2000))
}

// session runs one Tailer over cfg until stop(got) says so, then commits
// and closes it, returning the lines received.
func session(t *testing.T, cfg Config, until func(n int) bool) []string {
	t.Helper()
	tl := newTailer(t, cfg)
	r := start(t, tl)
	testutil.WaitFor(t, "session lines", waitDeadline, func() bool { return until(r.s.count()) })
	waitPolls(t, tl, 2)
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if err := tl.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := tl.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return r.s.texts()
}

func TestRestartResumesExactly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state"), MaxBatchLines: 7}
	appendFile(t, p, numbered("l", 0, 30)+"partial")
	got1 := session(t, cfg, func(n int) bool { return n >= 30 })
	appendFile(t, p, "-done\n"+numbered("l", 30, 40))
	got2 := session(t, cfg, func(n int) bool { return n >= 11 })
	all := append(got1, got2...)
	want := append(wantLines("l", 0, 30), "partial-done")
	equalLines(t, all, append(want, wantLines("l", 30, 40)...))

	// Nothing new: a third session delivers nothing.
	tl := newTailer(t, cfg)
	r := start(t, tl)
	waitPolls(t, tl, 3)
	r.stop()
	if n := r.s.count(); n != 0 {
		t.Fatalf("third session got %d lines: %q", n, r.s.texts())
	}
}

func TestRestartAfterRotationWhileStopped(t *testing.T) {
	t.Parallel()
	for _, rotated := range []string{"app.log.1", "app.log-20260101"} {
		t.Run(rotated, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := filepath.Join(dir, "app.log")
			cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state"), RotateGrace: 10 * time.Millisecond}
			appendFile(t, p, numbered("l", 0, 10))
			got1 := session(t, cfg, func(n int) bool { return n >= 10 })
			// While stopped: more lines, rotation, new file, and an unrelated file.
			appendFile(t, p, numbered("l", 10, 15)+"last-no-newline")
			if err := os.Rename(p, filepath.Join(dir, rotated)); err != nil {
				t.Fatal(err)
			}
			appendFile(t, filepath.Join(dir, "other.log.1"), "unrelated\n")
			appendFile(t, p, numbered("n", 0, 5))
			got2 := session(t, cfg, func(n int) bool { return n >= 11 })
			got := withoutLast(t, append(got1, got2...), "last-no-newline", 15)
			equalLines(t, got, append(wantLines("l", 0, 15), wantLines("n", 0, 5)...))
		})
	}
}

func TestRestartWhileDraining(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state"), RotateGrace: time.Hour}
	appendFile(t, p, numbered("l", 0, 10))
	tl := newTailer(t, cfg)
	r := start(t, tl)
	r.s.waitCount(t, 10)
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, numbered("n", 0, 3))
	r.s.waitCount(t, 13)
	r.stop()
	if len(tl.Positions()) != 2 {
		t.Fatalf("positions %+v, want two files", tl.Positions())
	}
	if err := tl.Commit(); err != nil {
		t.Fatal(err)
	}
	tl.Close()
	appendFile(t, p+".1", numbered("l", 10, 12)) // late lines in the old file
	appendFile(t, p, numbered("n", 3, 5))
	got2 := session(t, cfg, func(n int) bool { return n >= 4 })
	equalLines(t, got2, append(wantLines("l", 10, 12), wantLines("n", 3, 5)...))
}

func TestRestartTruncatedWhileStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state")}
	appendFile(t, p, numbered("l", 0, 10))
	session(t, cfg, func(n int) bool { return n >= 10 })
	if err := os.WriteFile(p, []byte(numbered("s", 0, 2)), 0o644); err != nil { // same inode, shorter
		t.Fatal(err)
	}
	got := session(t, cfg, func(n int) bool { return n >= 2 })
	equalLines(t, got, wantLines("s", 0, 2))
}

func TestRestartRewrittenWhileStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state")}
	appendFile(t, p, numbered("l", 0, 5))
	session(t, cfg, func(n int) bool { return n >= 5 })
	// Same inode, different content, longer than the saved offset: only
	// the fingerprint tells.
	if err := os.WriteFile(p, []byte(numbered("rewritten", 0, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := session(t, cfg, func(n int) bool { return n >= 10 })
	equalLines(t, got, wantLines("rewritten", 0, 10))
}

func TestRestartFileAppearedWhileStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	cfg := Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state"), StartAtEnd: true}
	tl := newTailer(t, cfg)
	if err := tl.Commit(); err != nil {
		t.Fatal(err)
	}
	tl.Close()
	appendFile(t, p, numbered("l", 0, 3))
	got := session(t, cfg, func(n int) bool { return n >= 3 })
	equalLines(t, got, wantLines("l", 0, 3))
}

func TestHandlerErrorRedelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("l", 0, 5))
	tl := newTailer(t, Config{Paths: []string{p}})
	boom := errors.New("sink down")
	var calls int
	err := tl.Run(context.Background(), func(lines []Line) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Run: %v after %d calls, want %v after 1", err, calls, boom)
	}
	if off := tl.Positions()[0].Offset; off != 0 {
		t.Fatalf("offset advanced to %d after a failed batch", off)
	}
	r := start(t, tl)
	r.s.waitCount(t, 5)
	r.stop()
	equalLines(t, r.s.texts(), wantLines("l", 0, 5))
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	tl, err := New(Config{Paths: []string{p}, StateFile: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- tl.Run(ctx, func([]Line) error { return nil }) }()
	waitPolls(t, tl, 1)
	if err := tl.Run(ctx, func([]Line) error { return nil }); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	if err := tl.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Run after Close: %v, want ErrClosed", err)
		}
	case <-time.After(waitDeadline):
		t.Fatal("Run did not return after Close")
	}
	if err := tl.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := tl.Run(ctx, func([]Line) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := tl.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{Paths: []string{""}},
		{Paths: []string{"a", "./a"}},
		{Paths: []string{"a"}, PollInterval: -1},
		{Paths: []string{"a"}, MaxLineBytes: -1},
		{Paths: []string{"a"}, MaxBatchLines: -1},
		{Paths: []string{"a"}, RotateGrace: -1},
	} {
		if tl, err := New(cfg); err == nil {
			tl.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestCorruptStateFallsBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	state := filepath.Join(dir, "state")
	appendFile(t, p, numbered("l", 0, 3))
	if err := os.WriteFile(state, []byte("garbage\x00\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{Paths: []string{p}, StateFile: state, StrictState: true})
	var se *StateError
	if !errors.As(err, &se) || !errors.Is(err, ErrCorruptState) {
		t.Fatalf("strict New: %v, want a *StateError wrapping ErrCorruptState", err)
	}
	tl := newTailer(t, Config{Paths: []string{p}, StateFile: state})
	if err := tl.LoadError(); !errors.As(err, &se) || se.MovedTo != state+".corrupt" {
		t.Fatalf("LoadError: %v", err)
	}
	if b, err := os.ReadFile(state + ".corrupt"); err != nil || !bytes.Equal(b, []byte("garbage\x00\xff")) {
		t.Fatalf("corrupt file not kept aside: %v", err)
	}
	r := start(t, tl)
	r.s.waitCount(t, 3)
	r.stop()
	equalLines(t, r.s.texts(), wantLines("l", 0, 3))
	if err := tl.Commit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeState(b); err != nil {
		t.Fatalf("new state file: %v", err)
	}
}

func TestCommitSkipsWhenUnchanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	state := filepath.Join(dir, "state")
	tl := newTailer(t, Config{Paths: []string{p}, StateFile: state})
	if err := tl.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := tl.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unchanged Commit rewrote the state file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestTruncatedAndRefilledPastOffset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, numbered("a", 0, 5))
	tl := newTailer(t, Config{Paths: []string{p}})
	r := start(t, tl)
	r.s.waitCount(t, 5)
	waitPolls(t, tl, 2) // the file is idle at its end
	r.stop()
	// While nothing polls: truncate in place and write more than before.
	if err := os.WriteFile(p, []byte(numbered("bb", 0, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := start(t, tl)
	r2.s.waitCount(t, 10)
	waitPolls(t, tl, 2)
	r2.stop()
	equalLines(t, r2.s.texts(), wantLines("bb", 0, 10))
}

func TestDrainingFilesBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	appendFile(t, p, "gen-0\n")
	tl := newTailer(t, Config{Paths: []string{p}, RotateGrace: time.Hour})
	r := start(t, tl)
	r.s.waitCount(t, 1)
	const gens = maxDraining + 4
	for i := 1; i <= gens; i++ {
		if err := os.Rename(p, fmt.Sprintf("%s.%d", p, i)); err != nil {
			t.Fatal(err)
		}
		appendFile(t, p, fmt.Sprintf("gen-%d\n", i))
		r.s.waitCount(t, i+1)
	}
	testutil.WaitFor(t, "old files closed", waitDeadline, func() bool { return len(tl.Positions()) <= maxDraining+1 })
	r.stop()
	equalLines(t, r.s.texts(), wantLines("gen", 0, gens+1))
}
