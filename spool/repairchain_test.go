package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRepairFixesWhatVerifyReports: for damage between and at the end of
// segments that are not the last (a segment deleted, one cut at a batch
// boundary or inside a batch, one zero-filled from a batch on, one that
// overlaps the one before it), Verify reports damage and Open refuses the
// directory; Repair then records what is lost, after which Verify is clean,
// Open accepts the directory and every record not reported removed reads
// back. (Before: Repair said there was nothing to repair for the first
// three, and the directory stayed unopenable.)
func TestRepairFixesWhatVerifyReports(t *testing.T) {
	src := t.TempDir()
	buildLog(t, src, 60, 1<<10, CodecNone)
	bases, _ := listSegments(src)
	if len(bases) < 5 {
		t.Fatalf("%d segments", len(bases))
	}
	const total = 120
	big := t.TempDir() // the same records, in bigger segments
	buildLog(t, big, 60, 4<<10, CodecNone)
	seg := func(dir string, i int) string { return filepath.Join(dir, segName(bases[i])) }
	layout := func(t *testing.T, i int) []batchPos {
		data, err := os.ReadFile(seg(src, i))
		if err != nil {
			t.Fatal(err)
		}
		return batchesOf(t, data)
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"middle segment deleted", func(t *testing.T, dir string) {
			if err := os.Remove(seg(dir, 2)); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment cut at a batch boundary", func(t *testing.T, dir string) {
			if err := os.Truncate(seg(dir, 1), layout(t, 1)[2].pos); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment cut inside a batch", func(t *testing.T, dir string) {
			if err := os.Truncate(seg(dir, 1), layout(t, 1)[2].pos+20); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment zero-filled from a batch on", func(t *testing.T, dir string) {
			data, _ := os.ReadFile(seg(dir, 1))
			clear(data[layout(t, 1)[1].pos:])
			if err := os.WriteFile(seg(dir, 1), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment zero-filled after its header", func(t *testing.T, dir string) {
			data, _ := os.ReadFile(seg(dir, 2))
			clear(data[segHeaderLen:])
			if err := os.WriteFile(seg(dir, 2), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment overlapping the one before", func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(big, segName(0)))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, segName(0)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			tc.damage(t, dir)
			rep, err := Verify(dir)
			if err != nil || rep.Clean() {
				t.Fatalf("verify: %+v %v", rep, err)
			}
			if l, err := Open(Config{Dir: dir}); err == nil {
				l.Close()
				t.Fatal("Open accepted the damaged directory")
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v", err)
			}
			rr, err := Repair(dir, nil)
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			if len(rr.Actions) == 0 {
				t.Fatal("repair found nothing to repair")
			}
			lost := map[uint64]bool{}
			for _, a := range rr.Actions {
				if a.Quarantined != "" {
					if _, err := os.Stat(filepath.Join(dir, a.Quarantined)); err != nil {
						t.Fatalf("original not kept: %v", err)
					}
				}
				for _, r := range a.Removed {
					if r.To <= r.From {
						t.Fatalf("%s: removed %+v at the end of a log that goes on", a.Segment, r)
					}
					for o := r.From; o < r.To; o++ {
						lost[o] = true
					}
				}
			}
			if rep, err := Verify(dir); err != nil || !rep.Clean() {
				t.Fatalf("verify after repair: %+v %v\nrepair: %+v", rep.Damaged, err, rr)
			}
			if rr2, err := Repair(dir, nil); err != nil || len(rr2.Actions) != 0 {
				t.Fatalf("second repair: %+v %v", rr2, err)
			}
			l, err := Open(Config{Dir: dir})
			if err != nil {
				t.Fatalf("open after repair: %v\nrepair: %+v", err, rr)
			}
			defer l.Close()
			if l.NextOffset() != total {
				t.Fatalf("next %d, want %d", l.NextOffset(), total)
			}
			got := readAll(t, l, 0)
			if len(got)+len(lost) != total {
				t.Fatalf("read %d records and %d reported lost, want %d in all", len(got), len(lost), total)
			}
			for _, r := range got {
				if lost[r.Offset] {
					t.Fatalf("record %d reported removed", r.Offset)
				}
				if w := fmt.Sprintf("value-%d-%c", r.Offset/2, 'a'+r.Offset%2); string(r.Value) != w {
					t.Fatalf("offset %d = %q", r.Offset, r.Value)
				}
			}
			if tc.name == "segment overlapping the one before" && len(lost) > 0 {
				t.Fatalf("records lost: %+v", rr)
			}
		})
	}
}

// TestNotASpool: Verify, Repair and OpenReadOnly refuse a directory that
// holds no spool instead of reporting an empty, clean log. (Before: Verify
// said clean and OpenReadOnly opened an empty log.)
func TestNotASpool(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrNotSpool) {
		t.Fatalf("verify: %v", err)
	}
	if _, err := Repair(dir, nil); !errors.Is(err, ErrNotSpool) {
		t.Fatalf("repair: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err == nil {
		t.Fatal("repair left a LOCK file in a directory that is no spool")
	}
	if l, err := OpenReadOnly(Config{Dir: dir}); !errors.Is(err, ErrNotSpool) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("open read-only: %v", err)
	}
	// An empty spool is a spool.
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if rep, err := Verify(dir); err != nil || !rep.Clean() {
		t.Fatalf("verify of an empty spool: %+v %v", rep, err)
	}
}
