package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/google/uuid"
)

const offsetsFile = "offsets.json"

// offsetsVersion is the format version of offsets.json that this package
// writes (see "Consumer offsets" in the package documentation). Files of
// version 0 (before versioning), 1 (next offsets alone) and 2 are read.
const offsetsVersion = 2

// Position is where a consumer stands in one log: Next, the next offset to
// read, in the log with identity ID, whose records up to Next belong to
// epoch Epoch or earlier (the epoch of the last record consumed; see
// "Identity and epochs" in the package documentation). The zero ID means the
// log is unknown: a position committed with Commit, or read from a file of
// format version 0 or 1.
type Position struct {
	Next  uint64    `json:"next"`
	ID    uuid.UUID `json:"id"`
	Epoch uint32    `json:"epoch"`
}

// UnmarshalJSON reads a position of format version 2 (an object) or a bare
// next offset (versions 0 and 1).
func (p *Position) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] != '{' {
		*p = Position{}
		return json.Unmarshal(b, &p.Next)
	}
	type plain Position
	return json.Unmarshal(b, (*plain)(p))
}

// OffsetStore keeps a consumer's committed positions per (source, stream) in
// one small file, replaced crash-safely on every Commit: write a temporary
// file, fsync it, rename it over the old one, fsync the directory. It takes a
// lock on its directory (ErrLocked for a second store). Safe for concurrent
// use; Commit blocks on disk I/O; Close is idempotent.
type OffsetStore struct {
	dir  string
	lock *os.File

	mu     sync.Mutex
	m      map[string]map[string]Position
	closed bool
}

// OpenOffsets opens (creating it if needed) the offset store in dir. It
// reads offsets files of every format version up to the current one; a file
// written by a newer format gives an error matching ErrUnsupportedVersion,
// one that cannot be decoded an error matching ErrCorrupt.
func OpenOffsets(dir string) (*OffsetStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spool: create offsets directory: %w", err)
	}
	lock, err := lockFile(filepath.Join(dir, "offsets.lock"))
	if err != nil {
		return nil, err
	}
	// A temporary file left by a crash mid-commit is never the truth: the
	// one written by this version (fsutil's) or by earlier ones.
	tmps, _ := filepath.Glob(filepath.Join(dir, offsetsFile+".tmp-*"))
	for _, t := range append(tmps, filepath.Join(dir, offsetsFile+".tmp")) {
		os.Remove(t)
	}
	m, err := readOffsets(filepath.Join(dir, offsetsFile))
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &OffsetStore{dir: dir, lock: lock, m: m}, nil
}

// readOffsets reads an offsets file; a missing file is an empty store.
func readOffsets(name string) (map[string]map[string]Position, error) {
	m := map[string]map[string]Position{}
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: read offsets: %w", err)
	}
	v, err := fsutil.DecodeVersionedJSON(b, offsetsVersion, &m)
	if errors.Is(err, fsutil.ErrUnknownVersion) {
		return nil, fmt.Errorf("%w: offsets file %s has format version %d; this build reads versions up to %d",
			ErrUnsupportedVersion, name, v, offsetsVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: offsets file %s: %v", ErrCorrupt, name, err)
	}
	if m == nil {
		// The file said null: no writer of this store ever writes that,
		// so it is damage, not an empty store to restart from earliest.
		return nil, fmt.Errorf("%w: offsets file %s holds no offsets (null)", ErrCorrupt, name)
	}
	for src, sm := range m {
		if sm == nil {
			delete(m, src)
		}
	}
	return m, nil
}

// Commit records next (the next offset to read) for (source, stream), with
// no identity or epoch (the zero ID), and returns once it is durable. A
// consumer that knows the log's identity and epoch uses CommitPosition.
func (s *OffsetStore) Commit(source, stream string, next uint64) error {
	return s.CommitPosition(source, stream, Position{Next: next})
}

// CommitPosition records p for (source, stream) and returns once it is durable.
func (s *OffsetStore) CommitPosition(source, stream string, p Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	old, had := s.m[source][stream]
	if s.m[source] == nil {
		s.m[source] = map[string]Position{}
	}
	s.m[source][stream] = p
	name := filepath.Join(s.dir, offsetsFile)
	err := fsutil.WriteVersionedJSON(name, offsetsVersion, s.m, 0o644)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("spool: commit offsets: %w", err)
	// Memory keeps what the file says: the new file may be in place with
	// only its directory entry not yet durable, or the old one may still be.
	if m, rerr := readOffsets(name); rerr == nil {
		s.m = m
	} else if had {
		s.m[source][stream] = old
	} else {
		delete(s.m[source], stream)
	}
	return err
}

// Get returns the committed next offset for (source, stream).
func (s *OffsetStore) Get(source, stream string) (uint64, bool) {
	p, ok := s.Position(source, stream)
	return p.Next, ok
}

// Position returns the committed position for (source, stream).
func (s *OffsetStore) Position(source, stream string) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.m[source][stream]
	return p, ok
}

// All returns a copy of every committed offset: source -> stream -> next.
func (s *OffsetStore) All() map[string]map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]uint64, len(s.m))
	for src, m := range s.m {
		c := make(map[string]uint64, len(m))
		for k, v := range m {
			c[k] = v.Next
		}
		out[src] = c
	}
	return out
}

// Positions returns a copy of every committed position: source -> stream ->
// position. The caller owns it.
func (s *OffsetStore) Positions() map[string]map[string]Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]Position, len(s.m))
	for src, m := range s.m {
		c := make(map[string]Position, len(m))
		for k, v := range m {
			c[k] = v
		}
		out[src] = c
	}
	return out
}

// Close releases the store's lock. It is idempotent.
func (s *OffsetStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Close()
}
