package spool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"time"
)

type batchPos struct {
	pos, size int64
	base      uint64
	count     uint32
}

// batchesOf parses the batch layout of a segment file's bytes.
func batchesOf(t *testing.T, data []byte) []batchPos {
	t.Helper()
	var out []batchPos
	for pos := segHeaderLen; pos+batchHeaderLen <= len(data); {
		h := parseBatchHeader(data[pos:])
		if h.Len == 0 {
			break
		}
		out = append(out, batchPos{pos: int64(pos), size: int64(h.Len), base: h.Base, count: h.Count})
		pos += int(h.Len)
	}
	return out
}

// buildLog writes appends of 2 records each and closes the log.
func buildLog(t *testing.T, dir string, appends int, segBytes int64, c Codec) {
	t.Helper()
	l, err := Open(Config{Dir: dir, Sync: SyncNone, SegmentBytes: segBytes, Codec: c})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < appends; i++ {
		if _, err := l.Append(context.Background(), Record{Value: fmt.Appendf(nil, "value-%d-a", i), Headers: []Header{{"h", []byte("x")}}},
			Record{Value: fmt.Appendf(nil, "value-%d-b", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), segSuffix) {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

func checkValues(t *testing.T, l *Log, n uint64) {
	t.Helper()
	got := readAll(t, l, 0)
	if uint64(len(got)) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	for i, r := range got {
		want := fmt.Sprintf("value-%d-%c", i/2, 'a'+i%2)
		if string(r.Value) != want || r.Offset != uint64(i) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Value, want)
		}
	}
}

func TestTornTailEveryByte(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			src := t.TempDir()
			buildLog(t, src, 4, 0, c)
			data, err := os.ReadFile(filepath.Join(src, segName(0)))
			if err != nil {
				t.Fatal(err)
			}
			bs := batchesOf(t, data)
			last := bs[len(bs)-1]
			if last.pos+last.size != int64(len(data)) {
				t.Fatalf("file not trimmed: %d vs %d", last.pos+last.size, len(data))
			}
			mutations := map[string][]byte{}
			for cut := last.pos; cut < int64(len(data)); cut++ {
				mutations[fmt.Sprintf("cut at %d", cut)] = data[:cut]
			}
			// A torn write into preallocated space: the tail of the batch is zeros.
			for k := last.pos + 1; k < int64(len(data)); k += 7 {
				m := append([]byte(nil), data...)
				clear(m[k:])
				m = append(m, make([]byte, 4096)...)
				mutations[fmt.Sprintf("zeros from %d", k)] = m
			}
			for name, m := range mutations {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, segName(0)), m, 0o644); err != nil {
					t.Fatal(err)
				}
				l, err := Open(Config{Dir: dir, Sync: SyncEach})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if l.NextOffset() != last.base {
					t.Fatalf("%s: next %d, want %d", name, l.NextOffset(), last.base)
				}
				checkValues(t, l, last.base)
				if first, err := l.Append(context.Background(), Record{Value: []byte("value-3-a")}); err != nil || first != last.base {
					t.Fatalf("%s: append after recovery: %d %v", name, first, err)
				}
				l.Close()
				q, _ := os.ReadDir(filepath.Join(dir, "quarantine"))
				if int64(len(m)) > last.pos && len(q) != 1 {
					t.Fatalf("%s: quarantine holds %d files", name, len(q))
				}
				if rep, err := Verify(dir); err != nil || !rep.Clean() {
					t.Fatalf("%s: verify after recovery: %+v %v", name, rep, err)
				}
			}
		})
	}
}

func TestBitFlips(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 30, 1<<10, CodecS2)
	bases, _ := listSegments(src)
	if len(bases) < 3 {
		t.Fatalf("%d segments", len(bases))
	}
	for si, base := range bases {
		name := segName(base)
		data, _ := os.ReadFile(filepath.Join(src, name))
		bs := batchesOf(t, data)
		lastSeg := si == len(bases)-1
		for bi, b := range bs {
			lastBatch := lastSeg && bi == len(bs)-1
			for _, off := range []int64{0, 4, 9, 12, 16, 24, 40, batchHeaderLen + 1, b.size - 1} {
				pos := b.pos + off
				dir := copyDir(t, src)
				m := append([]byte(nil), data...)
				m[pos] ^= 0x10
				os.WriteFile(filepath.Join(dir, name), m, 0o644)
				what := fmt.Sprintf("%s batch %d (offset %d) byte +%d", name, bi, b.base, off)

				rep, err := Verify(dir)
				if err != nil || rep.Clean() {
					t.Fatalf("%s: verify missed it: %+v %v", what, rep, err)
				}
				d := rep.Damaged[0]
				if d.Segment != name || d.Offset != b.base || d.Pos != b.pos {
					t.Fatalf("%s: verify reported %v", what, d)
				}

				l, err := Open(Config{Dir: dir})
				var ce *CorruptError
				switch {
				case lastBatch:
					// Indistinguishable from a torn write: truncated and kept aside.
					if err != nil || l.NextOffset() != b.base {
						t.Fatalf("%s: %v", what, err)
					}
				case lastSeg:
					if !errors.As(err, &ce) || ce.Segment != name || ce.Offset != b.base || ce.Pos != b.pos {
						t.Fatalf("%s: open: %v", what, err)
					}
				case off == 0:
					// A damaged length in an older segment breaks its structure.
					if !errors.As(err, &ce) || ce.Segment != name {
						t.Fatalf("%s: open: %v", what, err)
					}
				default:
					// Older segments are checked by structure on Open and by
					// checksum on every read.
					if err != nil {
						if !errors.As(err, &ce) || ce.Segment != name {
							t.Fatalf("%s: open: %v", what, err)
						}
						break
					}
					r, _ := l.NewReader(0)
					var rerr error
					for range 1000 {
						if _, rerr = r.Next(context.Background()); rerr != nil {
							break
						}
					}
					if !errors.As(rerr, &ce) || ce.Segment != name || ce.Offset != b.base || ce.Pos != b.pos {
						t.Fatalf("%s: read: %v", what, rerr)
					}
				}
				if l != nil {
					l.Close()
				}
			}
		}
	}
}

func TestZeroedSectorAndRepair(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 200, 4<<10, CodecNone)
	bases, _ := listSegments(src)
	if len(bases) < 4 {
		t.Fatalf("%d segments", len(bases))
	}
	// Zero a 512-byte sector in the middle of the second segment and of the last one.
	dir := copyDir(t, src)
	damage := func(base uint64) (uint64, int64) {
		p := filepath.Join(dir, segName(base))
		data, _ := os.ReadFile(p)
		bs := batchesOf(t, data)
		at := int64(len(data)/2) &^ 511
		clear(data[at : at+512])
		os.WriteFile(p, data, 0o644)
		for _, b := range bs {
			if b.pos+b.size > at {
				return b.base, b.pos
			}
		}
		t.Fatal("no batch")
		return 0, 0
	}
	off1, pos1 := damage(bases[1])
	offL, posL := damage(bases[len(bases)-1])

	rep, err := Verify(dir)
	if err != nil || len(rep.Damaged) != 2 {
		t.Fatalf("verify: %+v %v", rep.Damaged, err)
	}
	if d := rep.Damaged[0]; d.Segment != segName(bases[1]) || d.Offset != off1 || d.Pos != pos1 || d.Tail {
		t.Fatalf("damage 0: %v", d)
	}
	if d := rep.Damaged[1]; d.Offset != offL || d.Pos != posL || d.Tail {
		t.Fatalf("damage 1: %v", d)
	}
	_, err = Open(Config{Dir: dir})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open damaged: %v", err)
	}

	l, err := Open(Config{Dir: dir}) // still refused
	if err == nil {
		l.Close()
		t.Fatal("opened")
	}
	rr, err := Repair(dir, nil)
	if err != nil || len(rr.Actions) != 2 {
		t.Fatalf("repair: %+v %v", rr, err)
	}
	lost := map[uint64]bool{}
	for k, a := range rr.Actions {
		wantOff, wantPos := off1, pos1
		if k == 1 {
			wantOff, wantPos = offL, posL
		}
		if len(a.Removed) != 1 || len(a.Kept) != 1 {
			t.Fatalf("action %d: %+v", k, a)
		}
		r := a.Removed[0]
		if r.From != wantOff || r.Pos != wantPos || r.To <= r.From || r.Bytes < 512 {
			t.Fatalf("action %d removed %+v, want from offset %d at byte %d", k, r, wantOff, wantPos)
		}
		if a.Kept[0] != segName(r.To) {
			t.Fatalf("action %d kept %v", k, a.Kept)
		}
		if _, err := os.Stat(filepath.Join(dir, a.Quarantined)); err != nil {
			t.Fatal(err)
		}
		for o := r.From; o < r.To; o++ {
			lost[o] = true
		}
	}
	if rep, err := Verify(dir); err != nil || !rep.Clean() {
		t.Fatalf("verify after repair: %+v %v", rep, err)
	}
	total := uint64(400)
	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.NextOffset() != total {
		t.Fatalf("next %d want %d", l.NextOffset(), total)
	}
	got := readAll(t, l, 0)
	if uint64(len(got)) != total-uint64(len(lost)) {
		t.Fatalf("read %d, want %d", len(got), total-uint64(len(lost)))
	}
	for _, r := range got {
		if lost[r.Offset] {
			t.Fatalf("record %d from a removed range", r.Offset)
		}
		if w := fmt.Sprintf("value-%d-%c", r.Offset/2, 'a'+r.Offset%2); string(r.Value) != w {
			t.Fatalf("offset %d = %q", r.Offset, r.Value)
		}
	}
	// A reader positioned in a gap continues after it.
	to := rr.Actions[0].Removed[0].To
	rd, _ := l.NewReader(off1)
	if r, err := rd.Next(context.Background()); err != nil || r.Offset != to {
		t.Fatalf("next after gap: %d %v, want %d", r.Offset, err, to)
	}
	// The log goes on.
	if first, err := l.Append(context.Background(), Record{Value: []byte("more")}); err != nil || first != total {
		t.Fatalf("append after repair: %d %v", first, err)
	}
}

func TestSegmentHeaderVersion(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 2, 0, CodecNone)
	p := filepath.Join(dir, segName(0))
	data, _ := os.ReadFile(p)
	binary.LittleEndian.PutUint16(data[4:], 9)
	binary.LittleEndian.PutUint32(data[28:], crc(data[:28]))
	os.WriteFile(p, data, 0o644)
	_, err := Open(Config{Dir: dir})
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Version != 9 || !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("open: %v", err)
	}
}

func TestRepairDamagedHeader(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 60, 2<<10, CodecNone)
	bases, _ := listSegments(dir)
	p := filepath.Join(dir, segName(bases[1]))
	data, _ := os.ReadFile(p)
	data[2] ^= 0xff // magic
	os.WriteFile(p, data, 0o644)
	_, err := Open(Config{Dir: dir})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != segName(bases[1]) || ce.Offset != bases[1] {
		t.Fatalf("open: %v", err)
	}
	rr, err := Repair(dir, nil)
	if err != nil || len(rr.Actions) != 1 {
		t.Fatalf("repair: %+v %v", rr, err)
	}
	a := rr.Actions[0]
	if len(a.Kept) != 1 || a.Kept[0] != segName(bases[1]) || len(a.Removed) != 1 || a.Removed[0].To != a.Removed[0].From || a.Removed[0].Bytes != segHeaderLen {
		t.Fatalf("action %+v", a)
	}
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkValues(t, l, 120) // only the header was lost
}

func TestTornSegmentCreation(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, 3, 0, CodecNone)
	// A segment whose header was cut short, and a temporary file left by a
	// crash during segment creation.
	os.WriteFile(filepath.Join(dir, segName(6)), []byte("FMQS\x01"), 0o644)
	os.WriteFile(filepath.Join(dir, segName(6)+".tmp"), make([]byte, 100), 0o644)
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkValues(t, l, 6)
	if _, err := os.Stat(filepath.Join(dir, segName(6)+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary segment left")
	}
	if first, err := l.Append(context.Background(), Record{Value: []byte("value-3-a")}); err != nil || first != 6 {
		t.Fatalf("append: %d %v", first, err)
	}
}

// TestTornTailHoldingABatch tears the last batch of a log whose last record
// carries a whole valid batch as its value (a relayed ReadRaw): recovery
// must see a torn tail, not a valid batch after damage.
func TestTornTailHoldingABatch(t *testing.T) {
	src := openT(t, Config{Dir: t.TempDir()})
	ctx := context.Background()
	// Two batches, so that the embedded one has base offset 1: exactly
	// where the torn batch's records would continue.
	for _, v := range []string{"inner-0", "inner-1"} {
		if _, err := src.Append(ctx, Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	raw, _, err := src.ReadRaw(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, Record{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	payload := append(append([]byte{}, raw...), make([]byte, 64)...)
	if _, err := l.Append(ctx, Record{Value: payload}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segName(0))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Lose the last 32 bytes: the end of the second batch, after the
	// embedded one.
	if err := os.Truncate(seg, fi.Size()-32); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("open after a torn tail: %v", err)
	}
	defer l2.Close()
	if l2.NextOffset() != 1 {
		t.Fatalf("next offset %d after recovery, want 1 (the torn batch cut)", l2.NextOffset())
	}
}

// TestReadOnlyReportsDamageBehindTheWriter: a read-only follower reading
// new data finds a damaged batch, and the writer has since rolled to a new
// segment, so the batch will never be completed. Wait must return the
// damage instead of waiting forever.
func TestReadOnlyReportsDamageBehindTheWriter(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 40, 2048, CodecNone)
	segs, err := listSegments(src)
	if err != nil || len(segs) < 2 {
		t.Fatalf("want at least 2 segments, have %v (%v)", segs, err)
	}
	seg0, err := os.ReadFile(filepath.Join(src, segName(segs[0])))
	if err != nil {
		t.Fatal(err)
	}
	bs := batchesOf(t, seg0)
	if len(bs) < 3 {
		t.Fatalf("segment 0 has %d batches", len(bs))
	}
	// The follower first sees segment 0 up to its second batch.
	dir := t.TempDir()
	cut := bs[1].pos + bs[1].size
	if err := os.WriteFile(filepath.Join(dir, segName(segs[0])), seg0[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenReadOnly(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	next := l.NextOffset()
	if next != bs[2].base {
		t.Fatalf("follower at %d, want %d", next, bs[2].base)
	}
	// Then the rest of segment 0 arrives with its third batch damaged, and
	// the writer's next segment appears.
	rest := append([]byte(nil), seg0[cut:]...)
	rest[batchHeaderLen+2] ^= 0xff // inside the third batch's payload
	f, err := os.OpenFile(filepath.Join(dir, segName(segs[0])), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(rest); err != nil {
		t.Fatal(err)
	}
	f.Close()
	seg1, err := os.ReadFile(filepath.Join(src, segName(segs[1])))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segName(segs[1])), seg1, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = l.Wait(ctx, next)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != next {
		t.Fatalf("Wait returned %v; want a CorruptError at offset %d", err, next)
	}
}
