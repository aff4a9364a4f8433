package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// The journal holds a group's changes since its last snapshot, one entry
// per group commit; see the package doc ("Durability") for the format.
const (
	journalMagic   = "FMQJ"
	journalVersion = 1
	journalHdrLen  = 24 // magic | version u16 | reserved u16 | generation u64 | crc u32 | reserved u32
	EntryHdrLen    = 8  // payload length u32 | crc u32
	entryFixedLen  = 16 // cursor u64 | settled spans u32 | delivery runs u32
	// MaxEntryLen caps one entry's payload; a commit with more changes
	// writes a snapshot instead.
	MaxEntryLen = 1 << 20
	// JournalLimit is the journal size past which the next commit
	// compacts: it writes a snapshot and starts a new journal.
	JournalLimit = 8 << 20
	// maxReplayPending caps the pending records one entry may create,
	// as the snapshot's pending spans are capped.
	maxReplayPending = 1 << 24
	// A journal is preallocated: zeros are written ahead of its entries,
	// minPrealloc at its creation, then as much as it holds (at most
	// maxPrealloc) whenever an entry reaches past them, so that an
	// entry's fdatasync overwrites blocks the file has and need not
	// commit the file's size (a metadata commit, on ext4 a journal
	// transaction). Zeros where an entry would begin are the end.
	minPrealloc = 64 << 10
	maxPrealloc = 1 << 20
)

// zeroBlock is written (never changed) to preallocate journals.
var zeroBlock [minPrealloc]byte

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrJournalDamaged is wrapped by the errors of a journal that is damaged
// other than at its tail (a torn last entry is expected after a crash and
// is not an error), or whose entries do not fit the snapshot.
var ErrJournalDamaged = errors.New("group: journal damaged")

// DSpan is a run of pending offsets [From, To) delivered D times.
type DSpan struct {
	From, To uint64
	D        uint32
}

// Entry is one group commit's changes: the cursor after it, the offsets
// it settled and the delivery counts it changed.
type Entry struct {
	Next  uint64
	Done  []Span
	Deliv []DSpan
}

// AppendEntry appends e, framed (length, CRC32C of length and payload),
// to b.
func AppendEntry(b []byte, e *Entry) []byte {
	start := len(b)
	n := entryFixedLen + 16*len(e.Done) + 20*len(e.Deliv)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, e.Next)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Done)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Deliv)))
	for _, s := range e.Done {
		b = binary.BigEndian.AppendUint64(b, s.From)
		b = binary.BigEndian.AppendUint64(b, s.To)
	}
	for _, d := range e.Deliv {
		b = binary.BigEndian.AppendUint64(b, d.From)
		b = binary.BigEndian.AppendUint64(b, d.To)
		b = binary.BigEndian.AppendUint32(b, d.D)
	}
	crc := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+EntryHdrLen:])
	binary.BigEndian.PutUint32(b[start+4:], crc)
	return b
}

// DecodeEntry decodes the entry at the start of b and returns its size
// in bytes. It checks the length and the CRC before it allocates, and
// that the spans are ascending, disjoint and below the cursor.
func DecodeEntry(b []byte) (Entry, int, error) {
	var e Entry
	if len(b) < EntryHdrLen {
		return e, 0, fmt.Errorf("%w: entry header cut short (%d bytes)", ErrJournalDamaged, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if n < entryFixedLen || n > MaxEntryLen {
		return e, 0, fmt.Errorf("%w: entry length %d", ErrJournalDamaged, n)
	}
	if uint64(len(b)-EntryHdrLen) < uint64(n) {
		return e, 0, fmt.Errorf("%w: entry of %d bytes cut short at %d", ErrJournalDamaged, n, len(b)-EntryHdrLen)
	}
	p := b[EntryHdrLen : EntryHdrLen+int(n)]
	if crc := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, p); crc != binary.BigEndian.Uint32(b[4:]) {
		return e, 0, fmt.Errorf("%w: entry checksum mismatch", ErrJournalDamaged)
	}
	e.Next = binary.BigEndian.Uint64(p)
	nd, nr := uint64(binary.BigEndian.Uint32(p[8:])), uint64(binary.BigEndian.Uint32(p[12:]))
	if entryFixedLen+16*nd+20*nr != uint64(n) {
		return e, 0, fmt.Errorf("%w: %d spans and %d runs in an entry of %d bytes", ErrJournalDamaged, nd, nr, n)
	}
	q := p[entryFixedLen:]
	if nd > 0 {
		e.Done = make([]Span, nd)
	}
	for i := range e.Done {
		s := Span{binary.BigEndian.Uint64(q), binary.BigEndian.Uint64(q[8:])}
		q = q[16:]
		if s.From >= s.To || s.To > e.Next || (i > 0 && s.From <= e.Done[i-1].To) {
			return e, 0, fmt.Errorf("%w: settled span [%d, %d) out of order or beyond the cursor %d", ErrJournalDamaged, s.From, s.To, e.Next)
		}
		e.Done[i] = s
	}
	if nr > 0 {
		e.Deliv = make([]DSpan, nr)
	}
	for i := range e.Deliv {
		d := DSpan{binary.BigEndian.Uint64(q), binary.BigEndian.Uint64(q[8:]), binary.BigEndian.Uint32(q[16:])}
		q = q[20:]
		if d.From >= d.To || d.To > e.Next || (i > 0 && d.From < e.Deliv[i-1].To) {
			return e, 0, fmt.Errorf("%w: delivery run [%d, %d) out of order or beyond the cursor %d", ErrJournalDamaged, d.From, d.To, e.Next)
		}
		e.Deliv[i] = d
	}
	return e, EntryHdrLen + int(n), nil
}

func journalHeader(gen uint64) []byte {
	h := make([]byte, journalHdrLen)
	copy(h, journalMagic)
	binary.BigEndian.PutUint16(h[4:], journalVersion)
	binary.BigEndian.PutUint64(h[8:], gen)
	binary.BigEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	return h
}

// JournalPath is the journal of generation gen of a group.
func JournalPath(dir, stream, group string, gen uint64) string {
	return filepath.Join(dir, stream, fmt.Sprintf("%s.%016x.journal", group, gen))
}

// Recovery says what reading a group's journal found.
type Recovery struct {
	Entries   int    // entries replayed
	TornAt    int64  // byte offset of a torn last entry (0: none)
	TornBytes int64  // its bytes, copied aside to the journal's name + ".torn"
	TornErr   string // why the entry was not whole
}

// ReadJournal returns the entries of journal file path, which must be of
// generation gen. A damaged last entry (nothing valid after it) is a torn
// write: it is reported in the recovery, its bytes copied aside and the
// file cut before it. Damage followed by a valid entry is an error.
func ReadJournal(path string, gen uint64) ([]Entry, Recovery, error) {
	var rec Recovery
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, rec, fmt.Errorf("group: read journal: %w", err)
	}
	if len(b) < journalHdrLen || string(b[:4]) != journalMagic ||
		binary.BigEndian.Uint32(b[16:]) != crc32.Checksum(b[:16], castagnoli) {
		return nil, rec, fmt.Errorf("%w: %s: bad header", ErrJournalDamaged, filepath.Base(path))
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != journalVersion {
		return nil, rec, fmt.Errorf("group: journal %s: version %d, this build reads %d", filepath.Base(path), v, journalVersion)
	}
	if g := binary.BigEndian.Uint64(b[8:]); g != gen {
		return nil, rec, fmt.Errorf("%w: %s holds generation %d, want %d", ErrJournalDamaged, filepath.Base(path), g, gen)
	}
	var out []Entry
	pos := journalHdrLen
	for pos < len(b) {
		e, n, err := DecodeEntry(b[pos:])
		if err == nil {
			out = append(out, e)
			pos += n
			continue
		}
		if fsutil.AllZero(b[pos:]) {
			break // preallocated space: the end
		}
		// Damage: a torn tail only if no valid entry follows it.
		for p := pos + 1; p+EntryHdrLen+entryFixedLen <= len(b); p++ {
			if _, _, err2 := DecodeEntry(b[p:]); err2 == nil {
				return nil, rec, fmt.Errorf("%s at byte %d, followed by a valid entry at %d: %w", filepath.Base(path), pos, p, err)
			}
		}
		rec.TornAt, rec.TornBytes, rec.TornErr = int64(pos), int64(len(b)-pos), err.Error()
		if err := os.WriteFile(path+".torn", b[pos:], 0o644); err != nil {
			return nil, rec, fmt.Errorf("group: copy the torn tail of %s aside: %w", filepath.Base(path), err)
		}
		if err := os.Truncate(path, int64(pos)); err != nil {
			return nil, rec, fmt.Errorf("group: cut the torn tail of %s: %w", filepath.Base(path), err)
		}
		break
	}
	rec.Entries = len(out)
	return out, rec, nil
}

// RemoveOtherJournals removes the journals of a group other than
// generation keep (left by a crash during a compaction). Names are
// matched exactly: another group's journals never match.
func RemoveOtherJournals(dir, stream, group string, keep uint64) error {
	ents, err := os.ReadDir(filepath.Join(dir, stream))
	if err != nil {
		return err
	}
	for _, de := range ents {
		rest, ok := strings.CutPrefix(de.Name(), group+".")
		if !ok || len(rest) != 16+len(".journal") || !strings.HasSuffix(rest, ".journal") {
			continue
		}
		gen, err := strconv.ParseUint(rest[:16], 16, 64)
		if err != nil || gen == keep {
			continue
		}
		if err := os.Remove(filepath.Join(dir, stream, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Journal is an open Journal; the flusher owns it.
type Journal struct {
	f     *os.File
	path  string
	Gen   uint64
	Size  int64 // the end of its entries
	alloc int64 // the file's size: zeros from size on
}

// CreateJournal creates an empty journal of generation gen (written to
// a temporary file, synced, renamed into place, the directory synced).
func CreateJournal(dir, stream, group string, gen uint64) (*Journal, error) {
	path := JournalPath(dir, stream, group, gen)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Journal, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("group: create journal %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Write(journalHeader(gen)); err != nil {
		return fail(err)
	}
	if err := writeZeros(f, journalHdrLen, minPrealloc); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, err
	}
	return &Journal{f: f, path: path, Gen: gen, Size: journalHdrLen, alloc: minPrealloc}, nil
}

// writeZeros writes zeros to f from byte from to byte to.
func writeZeros(f *os.File, from, to int64) error {
	for from < to {
		n, err := f.WriteAt(zeroBlock[:min(int64(len(zeroBlock)), to-from)], from)
		if err != nil {
			return err
		}
		from += int64(n)
	}
	return nil
}

// Append writes entries (whole, framed) at the journal's end and waits
// until they are on disk (fdatasync). Entries reaching past the
// preallocated zeros write more of them, in the same fdatasync.
func (j *Journal) Append(b []byte) error {
	if _, err := j.f.WriteAt(b, j.Size); err != nil {
		return fmt.Errorf("group: write journal %s: %w", filepath.Base(j.path), err)
	}
	j.Size += int64(len(b))
	if j.Size > j.alloc {
		alloc := j.Size + min(max(j.Size, minPrealloc), maxPrealloc)
		if err := writeZeros(j.f, j.Size, alloc); err != nil {
			return fmt.Errorf("group: preallocate journal %s: %w", filepath.Base(j.path), err)
		}
		j.alloc = alloc
	}
	if err := fsutil.Datasync(j.f); err != nil {
		return fmt.Errorf("group: sync journal %s: %w", filepath.Base(j.path), err)
	}
	return nil
}

func (j *Journal) Close() error { return j.f.Close() }
