package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/google/uuid"
)

func captureLogger() (*slog.Logger, *testutil.LogBuffer) {
	buf := &testutil.LogBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// appendValues appends n records "<prefix>-<i>", ten per Append (so ten per batch).
func appendValues(t *testing.T, l *Log, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		recs := make([]Record, min(10, n-i))
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "%s-%d", prefix, i+j)
		}
		if _, err := l.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
}

// consumer keeps what a pull consumer stores, (id, epoch, next), and
// follows the documented protocol against a Log: continue where its epoch
// ended if that is before its position, and report what it lost.
type consumer struct {
	id    uuid.UUID
	epoch uint32
	next  uint64
	got   []string
	lost  [][2]uint64
}

func (c *consumer) resume(t *testing.T, l *Log) {
	t.Helper()
	if c.id != (uuid.UUID{}) && l.ID() != c.id {
		t.Fatalf("log identity changed from %s to %s", c.id, l.ID())
	}
	c.id = l.ID()
	end, ok := l.EpochEnd(c.epoch)
	if !ok {
		t.Fatalf("epoch %d unknown to the log (epochs %v)", c.epoch, l.Epochs())
	}
	if end < c.next {
		c.lost = append(c.lost, [2]uint64{end, c.next})
		c.next = end
	}
	for _, r := range readAll(t, l, c.next) {
		c.got = append(c.got, string(r.Value))
		c.epoch, c.next = l.EpochOf(r.Offset), r.Offset+1
	}
}

// lastBatches returns the segment file's bytes and the batch layout.
func lastSegment(t *testing.T, dir string) (string, []byte, []batchPos) {
	t.Helper()
	bases, err := listSegments(dir)
	if err != nil || len(bases) == 0 {
		t.Fatalf("segments %v, %v", bases, err)
	}
	name := filepath.Join(dir, segName(bases[len(bases)-1]))
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return name, data, batchesOf(t, data)
}

func readMetaT(t *testing.T, dir string) meta {
	t.Helper()
	m, ok, err := readMeta(dir)
	if err != nil || !ok {
		t.Fatalf("meta.json: %v, %v", ok, err)
	}
	return m
}

// Item 3: after the damaged acknowledged last batch is cut, the next
// appends reuse its offsets; a consumer that had read them must learn that
// (epoch end), receive every new record once and report the lost range.
func TestOffsetsReusedAfterCutStartANewEpoch(t *testing.T) {
	for _, how := range []string{"recovery", "repair"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Config{Dir: dir})
			appendValues(t, l, "old", 1000)
			id := l.ID()
			var c consumer
			c.resume(t, l)
			if len(c.got) != 1000 || c.next != 1000 {
				t.Fatalf("consumer read %d, next %d", len(c.got), c.next)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// Damage the last acknowledged batch, as the attack did.
			name, data, bs := lastSegment(t, dir)
			last := bs[len(bs)-1]
			data[last.pos+last.size-1] ^= 0xff
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
			logger, logs := captureLogger()
			if how == "repair" {
				rep, err := Repair(dir, logger)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.NewEpoch || rep.Epoch != 1 || rep.EpochStart != last.base {
					t.Fatalf("repair report: %+v", rep)
				}
			}
			l2 := openT(t, Config{Dir: dir, Logger: logger})
			if how == "recovery" {
				r := l2.Recovery()
				if r.TornBytes == 0 || r.LostFrom != last.base || r.LostTo != 1000 || !r.NewEpoch || r.Epoch != 1 {
					t.Fatalf("recovery report: %+v", r)
				}
				if !strings.Contains(logs.String(), "level=ERROR msg=\"acknowledged records lost") {
					t.Fatalf("no error logged for the lost acknowledged records:\n%s", logs)
				}
			} else if r := l2.Recovery(); r.NewEpoch || r.Lost() != 0 {
				t.Fatalf("open after repair: %+v", r)
			}
			if l2.NextOffset() != last.base {
				t.Fatalf("next %d, want %d", l2.NextOffset(), last.base)
			}
			if e, start := l2.Epoch(); e != 1 || start != last.base {
				t.Fatalf("epoch %d from %d, want 1 from %d", e, start, last.base)
			}
			if end, ok := l2.EpochEnd(0); !ok || end != last.base {
				t.Fatalf("epoch 0 ends at %d %v, want %d", end, ok, last.base)
			}
			if l2.ID() != id {
				t.Fatal("identity changed by recovery")
			}
			appendValues(t, l2, "new", 20)
			c.resume(t, l2)
			if len(c.lost) != 1 || c.lost[0] != [2]uint64{last.base, 1000} {
				t.Fatalf("consumer reported lost %v, want [%d 1000]", c.lost, last.base)
			}
			got := c.got[1000:]
			if len(got) != 20 {
				t.Fatalf("consumer received %d of the 20 new records: %v", len(got), got)
			}
			for i, v := range got {
				if v != fmt.Sprintf("new-%d", i) {
					t.Fatalf("new record %d: %q", i, v)
				}
			}
			// (epoch, offset) from before never names a new record: epoch
			// 0 ends before every one of them.
			if end, _ := l2.EpochEnd(0); end > last.base || l2.EpochOf(last.base) != 1 {
				t.Fatalf("epoch 0 ends at %d; offset %d is in epoch %d", end, last.base, l2.EpochOf(last.base))
			}
			if rep, err := Verify(dir); err != nil || !rep.Clean() {
				t.Fatalf("verify: %+v %v", rep, err)
			}
		})
	}
}

// Item 11: a zero-filled acknowledged tail looks like preallocated space;
// the recovery checkpoint tells them apart, after a clean Close and after a
// crash (the directory copied while the writer runs).
func TestZeroFilledAcknowledgedTail(t *testing.T) {
	for _, how := range []string{"closed", "crashed"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Config{Dir: dir, Sync: SyncEach})
			appendValues(t, l, "v", 1000)
			if how == "closed" {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				testutil.WaitFor(t, "checkpoint at 1000", 0, func() bool {
					m, ok, err := readMeta(dir)
					return err == nil && ok && m.Acked == 1000
				})
				src := dir
				dir = t.TempDir()
				for _, n := range []string{metaFileName, segName(0)} {
					b, err := os.ReadFile(filepath.Join(src, n))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if m := readMetaT(t, dir); m.Acked != 1000 {
				t.Fatalf("checkpoint %d, want 1000", m.Acked)
			}
			name, data, bs := lastSegment(t, dir)
			if len(bs) != 100 {
				t.Fatalf("%d batches", len(bs))
			}
			from := bs[len(bs)-7] // the disk lost the last 7 batches' blocks
			clear(data[from.pos:])
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Clean() || rep.Damaged[0].Offset != from.base || rep.Damaged[0].Pos != from.pos || rep.Damaged[0].Tail {
				t.Fatalf("verify of a zero-filled acknowledged tail: %+v", rep)
			}
			rdir := copyDirAll(t, dir)
			logger, logs := captureLogger()
			l2 := openT(t, Config{Dir: dir, Logger: logger})
			r := l2.Recovery()
			if r.LostFrom != from.base || r.LostTo != 1000 || r.Lost() != 70 || !r.NewEpoch || r.EpochStart != from.base {
				t.Fatalf("recovery report: %+v", r)
			}
			if !strings.Contains(logs.String(), "level=ERROR msg=\"acknowledged records lost") || !strings.Contains(logs.String(), "records=70") {
				t.Fatalf("no error logged for the 70 lost records:\n%s", logs)
			}
			if e, start := l2.Epoch(); e != 1 || start != 930 {
				t.Fatalf("epoch %d from %d", e, start)
			}
			l2.Close()
			if rep, err := Verify(dir); err != nil || !rep.Clean() {
				t.Fatalf("verify after recovery: %+v %v", rep, err)
			}
			// Repair acknowledges the loss the same way.
			rr, err := Repair(rdir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Lost) != 1 || rr.Lost[0].From != from.base || rr.Lost[0].To != 1000 || !rr.NewEpoch || rr.Epoch != 1 || !rr.Changed() {
				t.Fatalf("repair report: %+v", rr)
			}
			if rep, err := Verify(rdir); err != nil || !rep.Clean() {
				t.Fatalf("verify after repair: %+v %v", rep, err)
			}
			l3 := openT(t, Config{Dir: rdir})
			if r := l3.Recovery(); r.NewEpoch || r.Lost() != 0 {
				t.Fatalf("open after repair: %+v", r)
			}
		})
	}
}

// copyDirAll copies a stream directory's files (not its subdirectories).
func copyDirAll(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// A torn tail past the checkpoint (never acknowledged) still starts a new
// epoch, without reporting a loss: a read-only reader may have seen it.
func TestTornTailStartsEpochWithoutLoss(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir})
	appendValues(t, l, "v", 100)
	l.Close()
	name, data, bs := lastSegment(t, dir)
	last := bs[len(bs)-1]
	torn := append(data, data[last.pos:last.pos+last.size/2]...) // half a batch
	if err := os.WriteFile(name, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	logger, logs := captureLogger()
	l2 := openT(t, Config{Dir: dir, Logger: logger})
	r := l2.Recovery()
	if r.TornBytes != last.size/2 || r.TornFrom != 100 || r.Lost() != 0 || !r.NewEpoch || r.Epoch != 1 || r.EpochStart != 100 {
		t.Fatalf("recovery report: %+v", r)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("error logged for an unacknowledged torn tail:\n%s", logs)
	}
	if end, ok := l2.EpochEnd(0); !ok || end != 100 {
		t.Fatalf("epoch 0 ends at %d %v", end, ok)
	}
	if end, ok := l2.EpochEnd(1); !ok || end != 100 {
		t.Fatalf("current epoch ends at %d %v, want NextOffset", end, ok)
	}
	if _, ok := l2.EpochEnd(2); ok {
		t.Fatal("an epoch the log has not reached is known")
	}
}

// Item 7: every log has an identity, created with it, stable across
// reopening, different for every log; a directory from before gets one on
// its first writer Open.
func TestIdentity(t *testing.T) {
	dir, dir2 := t.TempDir(), t.TempDir()
	l := openT(t, Config{Dir: dir})
	id := l.ID()
	if id == (uuid.UUID{}) || !l.Recovery().NewID {
		t.Fatalf("new log: id %s, recovery %+v", id, l.Recovery())
	}
	appendValues(t, l, "v", 10)
	ro, err := OpenReadOnly(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ro.ID() != id {
		t.Fatalf("read-only Log: id %s, want %s", ro.ID(), id)
	}
	l.Close()
	l = openT(t, Config{Dir: dir})
	if l.ID() != id || l.Recovery().NewID {
		t.Fatalf("reopened: id %s, want %s", l.ID(), id)
	}
	if e, start := l.Epoch(); e != 0 || start != 0 {
		t.Fatalf("epoch %d from %d after a clean reopen", e, start)
	}
	if st := l.Stats(); st.ID != id || st.Epoch != 0 || st.EpochStart != 0 {
		t.Fatalf("stats: %+v", st)
	}
	l.Close()
	ro.Close()
	if other := openT(t, Config{Dir: dir2}); other.ID() == id {
		t.Fatal("two logs share an identity")
	}

	// A directory from before meta.json (only segments).
	old := copyDir(t, dir)
	ro, err = OpenReadOnly(Config{Dir: old})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.ID() != (uuid.UUID{}) {
		t.Fatalf("read-only Log of an old directory: id %s", ro.ID())
	}
	lo := openT(t, Config{Dir: old})
	if lo.ID() == (uuid.UUID{}) || lo.ID() == id || !lo.Recovery().NewID || lo.NextOffset() != 10 {
		t.Fatalf("old directory: id %s, recovery %+v, next %d", lo.ID(), lo.Recovery(), lo.NextOffset())
	}
	// The read-only Log picks up the identity the writer created.
	if ro.ID() != lo.ID() {
		t.Fatalf("read-only Log: id %s, writer's %s", ro.ID(), lo.ID())
	}
	checkpoint := readMetaT(t, old)
	if checkpoint.ID != lo.ID() || len(checkpoint.Epochs) != 1 || checkpoint.Epochs[0] != (Epoch{}) {
		t.Fatalf("meta.json of an old directory: %+v", checkpoint)
	}
}

// The recovery checkpoint follows the acknowledged end: on Close, and in
// the background while the writer runs.
func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir})
	appendValues(t, l, "v", 30)
	testutil.WaitFor(t, "background checkpoint", 0, func() bool {
		m, _, _ := readMeta(dir)
		return m.Acked == 30
	})
	appendValues(t, l, "v", 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if m := readMetaT(t, dir); m.Acked != 35 {
		t.Fatalf("checkpoint after Close: %d, want 35", m.Acked)
	}
}

// The meta file is versioned; a newer version is refused, a damaged one is
// reported (by Open, OpenReadOnly and Verify) and never silently replaced:
// Repair moves it aside and gives the log a new identity.
func TestMetaFileRefused(t *testing.T) {
	cases := map[string]struct {
		content string
		want    error
	}{
		"newer version": {`{"version":2,"data":{"id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427"}}` + "\n", ErrUnsupportedVersion},
		"truncated":     {`{"version":1,"data":{"id":"1b4e28ba-2fa1-11d2`, ErrCorrupt},
		"unversioned":   {`{"id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427"}`, ErrCorrupt},
		"no epochs":     {`{"version":1,"data":{"id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","epochs":[],"acked":0}}`, ErrCorrupt},
		"disordered": {`{"version":1,"data":{"id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427",` +
			`"epochs":[{"epoch":0,"start":0},{"epoch":2,"start":9},{"epoch":1,"start":10}],"acked":0}}`, ErrCorrupt},
		"zeros": {"\x00\x00\x00\x00", ErrCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Config{Dir: dir})
			appendValues(t, l, "v", 10)
			id := l.ID()
			l.Close()
			mf := filepath.Join(dir, metaFileName)
			if err := os.WriteFile(mf, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Config{Dir: dir})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), mf) {
				t.Fatalf("Open: %v, want %v naming the file", err, tc.want)
			}
			if _, err := OpenReadOnly(Config{Dir: dir}); !errors.Is(err, tc.want) {
				t.Fatalf("OpenReadOnly: %v, want %v", err, tc.want)
			}
			if b, _ := os.ReadFile(mf); string(b) != tc.content {
				t.Fatal("meta.json was replaced")
			}
			if rep, err := Verify(dir); err != nil || rep.Clean() || rep.Damaged[0].Segment != metaFileName {
				t.Fatalf("verify: %+v %v", rep, err)
			}
			rep, err := Repair(dir, nil)
			if tc.want == ErrUnsupportedVersion {
				if !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("repair of a newer meta.json: %+v %v", rep, err)
				}
				return
			}
			if err != nil || rep.MetaQuarantined == "" || !rep.NewID || !rep.Changed() {
				t.Fatalf("repair: %+v %v", rep, err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, rep.MetaQuarantined)); err != nil || string(b) != tc.content {
				t.Fatalf("quarantined meta.json: %q %v", b, err)
			}
			l2 := openT(t, Config{Dir: dir})
			if l2.ID() == id || l2.ID() == (uuid.UUID{}) || l2.NextOffset() != 10 {
				t.Fatalf("after repair: id %s (was %s), next %d", l2.ID(), id, l2.NextOffset())
			}
		})
	}
}

// The epoch history as Kafka's leader-epoch cache: a new epoch drops
// entries that start at or after it; an epoch ends where the first later
// entry starts.
func TestEpochHistory(t *testing.T) {
	m := newMeta(0)
	m.bump(990)  // epoch 1 from 990
	m.bump(1010) // epoch 2 from 1010
	m.bump(1000) // cut at 1000: epoch 2 is gone, epoch 3 from 1000
	want := []Epoch{{0, 0}, {1, 990}, {3, 1000}}
	if fmt.Sprint(m.Epochs) != fmt.Sprint(want) {
		t.Fatalf("epochs %v, want %v", m.Epochs, want)
	}
	for _, tc := range []struct {
		epoch uint32
		end   uint64
		ok    bool
	}{{0, 990, true}, {1, 1000, true}, {2, 1000, true}, {3, 1234, true}, {4, 0, false}} {
		if end, ok := m.epochEnd(tc.epoch, 1234); end != tc.end || ok != tc.ok {
			t.Errorf("epochEnd(%d) = %d %v, want %d %v", tc.epoch, end, ok, tc.end, tc.ok)
		}
	}
	for o, e := range map[uint64]uint32{0: 0, 989: 0, 990: 1, 999: 1, 1000: 3, 5000: 3} {
		if got := m.epochOf(o); got != e {
			t.Errorf("epochOf(%d) = %d, want %d", o, got, e)
		}
	}
	m.bump(0) // everything cut
	if fmt.Sprint(m.Epochs) != fmt.Sprint([]Epoch{{4, 0}}) {
		t.Fatalf("epochs %v", m.Epochs)
	}
	if end, ok := m.epochEnd(0, 7); !ok || end != 0 {
		t.Fatalf("epochEnd(0) = %d %v, want 0", end, ok)
	}
}

// After a crash, records acknowledged after the last checkpoint can vanish
// without a trace (a zero-filled tail ending exactly at the checkpoint): the
// writer did not close cleanly, so Open starts a new epoch anyway, and a
// consumer that read them learns it.
func TestUncleanCloseStartsEpoch(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir, Sync: SyncEach})
	appendValues(t, l, "old", 1000)
	testutil.WaitFor(t, "checkpoint at 1000", 0, func() bool {
		m, ok, err := readMeta(dir)
		return err == nil && ok && m.Acked == 1000
	})
	// The crash image: meta.json as of now, the segment after 50 more
	// acknowledged records.
	crashed := t.TempDir()
	mb, err := os.ReadFile(filepath.Join(dir, metaFileName))
	if err != nil {
		t.Fatal(err)
	}
	appendValues(t, l, "old", 50)
	var c consumer
	c.resume(t, l)
	if c.next != 1050 {
		t.Fatalf("consumer at %d", c.next)
	}
	seg, err := os.ReadFile(filepath.Join(dir, segName(0)))
	if err != nil {
		t.Fatal(err)
	}
	bs := batchesOf(t, seg)
	clear(seg[bs[100].pos:]) // the disk lost the 50 records after the checkpoint
	if err := os.WriteFile(filepath.Join(crashed, segName(0)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, metaFileName), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	logger, logs := captureLogger()
	l2 := openT(t, Config{Dir: crashed, Logger: logger})
	r := l2.Recovery()
	if !r.Unclean || !r.NewEpoch || r.Lost() != 0 || r.Epoch != 1 || r.EpochStart != 1000 {
		t.Fatalf("recovery report: %+v", r)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("error logged without a known loss:\n%s", logs)
	}
	appendValues(t, l2, "new", 20)
	c.resume(t, l2)
	if len(c.lost) != 1 || c.lost[0] != [2]uint64{1000, 1050} || len(c.got) != 1070 || c.got[1050] != "new-0" {
		t.Fatalf("consumer lost %v, received %d records", c.lost, len(c.got))
	}
	l2.Close()
	l3 := openT(t, Config{Dir: crashed})
	if r := l3.Recovery(); r.Unclean || r.NewEpoch {
		t.Fatalf("reopened after a clean close: %+v", r)
	}
}

// TestMetaFormat pins meta.json's format version 1 byte for byte
// (testdata/golden/meta-v1.json, rewritten with -update) and reads it back.
func TestMetaFormat(t *testing.T) {
	m := meta{ID: uuid.MustParse("1b4e28ba-2fa1-41d2-883f-0016d3cca427"),
		Epochs: []Epoch{{0, 0}, {1, 990}, {3, 1000}}, Acked: 1020, Open: true}
	dir := t.TempDir()
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, metaFileName))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden", "meta-v1.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("meta.json is\n%s\nwant (golden)\n%s", got, want)
	}
	back := readMetaT(t, dir)
	if fmt.Sprint(back) != fmt.Sprint(m) {
		t.Fatalf("read back %+v, want %+v", back, m)
	}
}
