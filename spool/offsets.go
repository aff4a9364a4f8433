package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

const offsetsFile = "offsets.json"

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

// OpenOffsets opens (creating it if needed) the offset store in dir.
func OpenOffsets(dir string) (*OffsetStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spool: create offsets directory: %w", err)
	}
	lock, err := lockFile(filepath.Join(dir, "offsets.lock"))
	if err != nil {
		return nil, err
	}
	s := &OffsetStore{dir: dir, lock: lock, m: map[string]map[string]uint64{}}
	os.Remove(filepath.Join(dir, offsetsFile+".tmp")) // a temp file left by a crash is never the truth
	b, err := os.ReadFile(filepath.Join(dir, offsetsFile))
	switch {
	case os.IsNotExist(err):
	case err != nil:
		lock.Close()
		return nil, fmt.Errorf("spool: read offsets: %w", err)
	default:
		if err := json.Unmarshal(b, &s.m); err != nil {
			lock.Close()
			return nil, fmt.Errorf("%w: offsets file: %v", ErrCorrupt, err)
		}
		if s.m == nil { // the file said null
			s.m = map[string]map[string]uint64{}
		}
		for src, m := range s.m {
			if m == nil {
				delete(s.m, src)
			}
		}
	}
	return s, nil
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
	if renamed, err := s.writeLocked(); err != nil {
		if renamed {
			// The new file is in place; only its directory entry may not
			// be durable yet. Memory keeps what the file says.
			return err
		}
		if had {
			s.m[source][stream] = old
		} else {
			delete(s.m[source], stream)
		}
		return err
	}
	return nil
}

// writeLocked replaces the offsets file; renamed reports whether the new
// file was renamed into place (even if the directory fsync then failed).
func (s *OffsetStore) writeLocked() (renamed bool, err error) {
	b, err := json.Marshal(s.m)
	if err != nil {
		return false, fmt.Errorf("spool: encode offsets: %w", err)
	}
	tmp := filepath.Join(s.dir, offsetsFile+".tmp")
	if err := writeSynced(tmp, b); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, offsetsFile)); err != nil {
		return false, fmt.Errorf("spool: commit offsets: %w", err)
	}
	return true, fsyncDir(s.dir)
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
