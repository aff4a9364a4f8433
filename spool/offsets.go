package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fastmq/fastmq/internal/fsutil"
)

const offsetsFile = "offsets.json"

// offsetsVersion is the format version of offsets.json that this package
// writes (see "Consumer offsets" in the package documentation). Files of
// version 0 (before versioning) and 1 are read.
const offsetsVersion = 1

// OffsetStore keeps a consumer's committed offsets per (source, stream) in
// one small file, replaced crash-safely on every Commit: write a temporary
// file, fsync it, rename it over the old one, fsync the directory. It takes a
// lock on its directory (ErrLocked for a second store). Safe for concurrent
// use; Commit blocks on disk I/O; Close is idempotent.
type OffsetStore struct {
	dir  string
	lock *os.File

	mu     sync.Mutex
	m      map[string]map[string]uint64
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
func readOffsets(name string) (map[string]map[string]uint64, error) {
	m := map[string]map[string]uint64{}
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
	if m == nil { // the file said null
		m = map[string]map[string]uint64{}
	}
	for src, sm := range m {
		if sm == nil {
			delete(m, src)
		}
	}
	return m, nil
}

// Commit records next (the next offset to read) for (source, stream) and
// returns once it is durable.
func (s *OffsetStore) Commit(source, stream string, next uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	old, had := s.m[source][stream]
	if s.m[source] == nil {
		s.m[source] = map[string]uint64{}
	}
	s.m[source][stream] = next
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
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[source][stream]
	return v, ok
}

// All returns a copy of every committed offset: source -> stream -> next.
func (s *OffsetStore) All() map[string]map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]uint64, len(s.m))
	for src, m := range s.m {
		c := make(map[string]uint64, len(m))
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
