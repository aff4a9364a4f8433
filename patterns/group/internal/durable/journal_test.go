package durable

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
)

func TestJournalEntryRoundTrip(t *testing.T) {
	for _, e := range []Entry{
		{Next: 7},
		{Next: 100, Done: []Span{{0, 3}, {5, 9}}, Deliv: []DSpan{{3, 5, 1}, {9, 20, 2}}},
	} {
		b := AppendEntry([]byte("xx"), &e)
		got, n, err := DecodeEntry(b[2:])
		if err != nil || n != len(b)-2 || !reflect.DeepEqual(got, e) {
			t.Fatalf("%+v: decoded %+v, %d of %d bytes, %v", e, got, n, len(b)-2, err)
		}
	}
}

// writeJournal writes a version 2 snapshot (empty group at offset 0,
// journal generation 1) and a journal holding entries; it returns the
// journal's path and each entry's end in it.
func writeJournal(t *testing.T, dir string, entries []Entry) (string, []int) {
	t.Helper()
	f := File{Journal: 1, Stream: "s", Group: "g", Settings: Settings{AckWait: defaultAckWait}}
	if err := Write(dir, f); err != nil {
		t.Fatal(err)
	}
	j, err := CreateJournal(dir, "s", "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var ends []int
	for i := range entries {
		if err := j.Append(AppendEntry(nil, &entries[i])); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, int(j.Size))
	}
	return j.path, ends
}

// summary is what a loaded state says: floor, cursor, settled spans and
// pending records with their delivery counts.
type summary struct {
	floor, next uint64
	done        []Span
	pend        map[uint64]uint32
}

func summarize(g *State) summary {
	s := summary{floor: g.Floor, next: g.Next, done: append([]Span(nil), g.Done...), pend: map[uint64]uint32{}}
	for o, p := range g.Pend {
		s.pend[o] = p.Deliveries
	}
	return s
}

var testEntries = []Entry{
	{Next: 10, Done: []Span{{0, 3}}, Deliv: []DSpan{{3, 10, 1}}},
	{Next: 20, Done: []Span{{3, 5}, {10, 12}}, Deliv: []DSpan{{12, 14, 1}}},
	{Next: 30, Done: []Span{{5, 10}}, Deliv: []DSpan{{14, 16, 2}}},
}

// Replay gives the state the entries describe.
func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, testEntries)
	g, rec, err := Load(dir, "s", "g")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Entries != 3 || rec.TornBytes != 0 {
		t.Fatalf("recovery %+v", rec)
	}
	want := summary{floor: 12, next: 30, pend: map[uint64]uint32{}}
	for o := uint64(12); o < 30; o++ {
		want.pend[o] = 1
	}
	want.pend[12], want.pend[13], want.pend[14], want.pend[15] = 1, 1, 2, 2
	if got := summarize(g); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %+v\nwant %+v", got, want)
	}
	if g.Avail != len(g.Pend) {
		t.Fatalf("%d available of %d pending", g.Avail, len(g.Pend))
	}
}

// A torn last entry, cut at any byte or with any byte damaged, is
// reported and copied aside, and the entries before it hold; damage
// followed by a valid entry is an error, never a clean journal.
func TestJournalTornTail(t *testing.T) {
	ref := t.TempDir()
	writeJournal(t, ref, testEntries[:2])
	g, _, err := Load(ref, "s", "g")
	if err != nil {
		t.Fatal(err)
	}
	want := summarize(g)

	dir := t.TempDir()
	path, ends := writeJournal(t, dir, testEntries)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	load := func(b []byte) (*State, Recovery, error) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(path + ".torn")
		return Load(dir, "s", "g")
	}
	check := func(what string, b []byte) {
		t.Helper()
		g, rec, err := load(b)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rec.Entries != 2 || rec.TornAt != int64(ends[1]) || rec.TornBytes != int64(len(b)-ends[1]) {
			t.Fatalf("%s: recovery %+v, want 2 entries and the tail torn at %d", what, rec, ends[1])
		}
		if got := summarize(g); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: state %+v, want %+v", what, got, want)
		}
		aside, err := os.ReadFile(path + ".torn")
		if err != nil || !bytes.Equal(aside, b[ends[1]:]) {
			t.Fatalf("%s: torn bytes not copied aside: %v", what, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() != int64(ends[1]) {
			t.Fatalf("%s: journal not cut at %d: %v", what, ends[1], err)
		}
	}
	for cut := ends[1] + 1; cut < ends[2]; cut++ {
		if fsutil.AllZero(full[ends[1]:cut]) {
			continue // the length's zero high bytes: read as the end (below)
		}
		check("cut", full[:cut])
	}
	for i := ends[1]; i < ends[2]; i++ {
		b := bytes.Clone(full)
		b[i] ^= 0x5a
		check("damaged byte", b)
	}
	// Zeros where an entry would begin are the end (preallocated space,
	// or an entry none of whose bytes reached the disk): nothing torn.
	zeroed := bytes.Clone(full)
	clear(zeroed[ends[1]:])
	if g, rec, err := load(zeroed); err != nil || rec.Entries != 2 || rec.TornBytes != 0 || !reflect.DeepEqual(summarize(g), want) {
		t.Fatalf("zeroed tail: recovery %+v, %v; want 2 entries, nothing torn", rec, err)
	}
	if fi, err := os.Stat(path + ".torn"); err == nil {
		t.Fatalf("zeroed tail: %d bytes copied aside", fi.Size())
	}

	// Damage in the middle: a valid entry follows.
	for _, i := range []int{journalHdrLen, journalHdrLen + 5, journalHdrLen + 12, ends[0] + 9} {
		b := bytes.Clone(full)
		b[i] ^= 0x5a
		if _, _, err := load(b); !errors.Is(err, ErrJournalDamaged) {
			t.Fatalf("damage at byte %d before a valid entry: %v, want ErrJournalDamaged", i, err)
		}
	}
	// A damaged header, a journal of another generation, a missing one.
	b := bytes.Clone(full)
	b[9] ^= 1
	if _, _, err := load(b); !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("damaged header: %v", err)
	}
	os.Remove(path)
	if _, _, err := Load(dir, "s", "g"); err == nil {
		t.Fatal("a snapshot whose journal is missing loaded")
	}
}

// A journal is preallocated (zeros ahead of its entries, grown as they
// pass them), and reads back whole, nothing torn; an entry torn in the
// preallocated space is torn as at the end of a file.
func TestJournalPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	var entries []Entry
	for i := range 600 { // 152 bytes each: past the first preallocation
		base := uint64(i) * 100
		e := Entry{Next: base + 100}
		for k := range uint64(8) {
			e.Done = append(e.Done, Span{base + 10*k, base + 10*k + 5})
		}
		entries = append(entries, e)
	}
	path, ends := writeJournal(t, dir, entries)
	last := int64(ends[len(ends)-1])
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if last <= minPrealloc || fi.Size() <= last {
		t.Fatalf("journal of %d bytes holds entries up to %d: want zeros written ahead of entries past %d", fi.Size(), last, minPrealloc)
	}
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fsutil.AllZero(full[last:]) {
		t.Fatal("the preallocated space is not zeros")
	}
	g, rec, err := Load(dir, "s", "g")
	if err != nil || rec.Entries != len(entries) || rec.TornBytes != 0 {
		t.Fatalf("recovery %+v, %v; want %d entries, nothing torn", rec, err, len(entries))
	}
	if g.Next != 60000 || len(g.Pend) != 36000 {
		t.Fatalf("replayed cursor %d with %d pending, want 60000 and 36000", g.Next, len(g.Pend))
	}

	// The last entry's second half never reached the disk: torn.
	b := bytes.Clone(full)
	from := ends[len(ends)-2]
	clear(b[(from+ends[len(ends)-1])/2 : last])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, rec, err = Load(dir, "s", "g")
	if err != nil || rec.Entries != len(entries)-1 || rec.TornAt != int64(from) {
		t.Fatalf("recovery %+v, %v; want %d entries and the tail torn at %d", rec, err, len(entries)-1, from)
	}
}

// Entries that contradict the snapshot are damage.
func TestJournalEntryBeyondSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, []Entry{{Next: 10}, {Next: 5}})
	if _, _, err := Load(dir, "s", "g"); !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("a cursor going back: %v", err)
	}
	dir = t.TempDir()
	writeJournal(t, dir, []Entry{{Next: 1 << 40}})
	if _, _, err := Load(dir, "s", "g"); !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("an entry making 2^40 records pending: %v", err)
	}
}

// A version 1 state file (no journal) stays readable.
func TestStateVersion1(t *testing.T) {
	dir := t.TempDir()
	v1 := map[string]any{"stream": "s", "group": "g", "settings": map[string]any{"ack_wait": int64(defaultAckWait)},
		"floor": 2, "next": 9, "done": []Span{{4, 6}}, "pending": [][3]uint64{{2, 4, 1}, {6, 9, 3}}}
	if err := os.MkdirAll(filepath.Join(dir, "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.WriteVersionedJSON(Path(dir, "s", "g"), 1, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	g, _, err := Load(dir, "s", "g")
	if err != nil {
		t.Fatal(err)
	}
	want := summary{floor: 2, next: 9, done: []Span{{4, 6}}, pend: map[uint64]uint32{2: 1, 3: 1, 6: 3, 7: 3, 8: 3}}
	if got := summarize(g); !reflect.DeepEqual(got, want) || g.Gen != 0 || !g.NeedSnap {
		t.Fatalf("version 1 state %+v (gen %d), want %+v", got, g.Gen, want)
	}
}

func FuzzJournalEntry(f *testing.F) {
	for i := range testEntries {
		f.Add(AppendEntry(nil, &testEntries[i]))
	}
	f.Add([]byte{0, 0, 0, 16, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, ErrJournalDamaged) {
				t.Fatalf("error %v does not wrap ErrJournalDamaged", err)
			}
			return
		}
		if again := AppendEntry(nil, &e); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoded %x, decoded from %x", again, b[:n])
		}
		if e.Next > 1<<16 {
			return // TestJournalEntryBeyondSnapshot covers the bound
		}
		g := New("s", "g", Settings{}, 0)
		if err := g.Apply(&e, time.Time{}); err != nil && !errors.Is(err, ErrJournalDamaged) {
			t.Fatalf("apply: %v", err)
		}
	})
}

// defaultAckWait is group.DefaultAckWait, the settings of the snapshots
// these tests write.
const defaultAckWait = 30 * time.Second
