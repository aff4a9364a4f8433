// Package streams keeps a node's stream spools: the ones open for appends,
// the ones on disk that would not open (with why), and the damaged ones,
// served read-only up to their damage until they are repaired. The node
// (package fastmq) serves and advertises what a Set holds.
package streams

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/fastmq/fastmq/spool"
)

// Errors of a Set; the node re-exports them.
var (
	// ErrClosed is returned by Get on a closed Set.
	ErrClosed = errors.New("fastmq: closed")
	// ErrBadName reports a stream name that cannot be used.
	ErrBadName = errors.New("fastmq: bad stream name")
	// ErrDamaged reports an append to a stream whose spool is damaged in
	// the middle: it is served read-only, up to the damage, until repaired.
	ErrDamaged = errors.New("fastmq: stream damaged")
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether name can name a stream (or a consumer, or a
// group): 1 to 128 letters, digits, '.', '_' and '-', not starting with
// '.' or '-'.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Config configures a Set. Dir and Open are required.
type Config struct {
	// Dir holds a directory per stream (a node's DataDir/streams).
	Dir string
	// Open opens the writer's spool of a stream under the node's config.
	Open func(name string) (*spool.Log, error)
	// Advertise is given every served name, sorted, before a new stream
	// is handed out (nil: nothing to advertise).
	Advertise func(names []string) error
	// Logger receives the set's logs; nil discards them.
	Logger *slog.Logger
}

// Set is a node's streams. It is safe for concurrent use.
type Set struct {
	cfg    Config
	log    *slog.Logger
	openMu sync.Mutex // serialises opening (disk and gossip work); taken before mu
	mu     sync.Mutex // guards the fields below; never held across I/O
	logs   map[string]*spool.Log
	failed map[string]error      // streams on disk that would not open, by name
	ro     map[string]*spool.Log // failed ones served read-only up to their damage
	closed bool
}

// New returns an empty Set; OpenDisk fills it from Dir.
func New(cfg Config) *Set {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Set{cfg: cfg, log: lg, logs: map[string]*spool.Log{}, failed: map[string]error{}, ro: map[string]*spool.Log{}}
}

// OpenDisk opens every stream found under Dir. A stream that does not
// open (a damaged spool, say) does not stop the others: it is logged,
// reported by Snapshot, served read-only when it is damage in the middle
// of its spool, and tried again by every later Get (after a repair, say).
func (s *Set) OpenDisk() error {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("fastmq: list streams: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !ValidName(e.Name()) {
			continue
		}
		name := e.Name()
		l, err := s.cfg.Open(name)
		s.mu.Lock()
		if err != nil {
			s.failed[name] = err
			s.mu.Unlock()
			s.openDamaged(name, err)
			continue
		}
		s.logs[name] = l
		s.mu.Unlock()
		s.log.Info("stream open", "stream", name, "offset", l.NextOffset())
	}
	return nil
}

// openDamaged serves a stream that would not open, err saying why,
// read-only up to its damage when err is damage in the middle of its
// spool; either way it logs the stream at Error.
func (s *Set) openDamaged(name string, err error) {
	if !errors.Is(err, spool.ErrCorrupt) {
		s.log.Error("stream not served", "stream", name, "err", err)
		return
	}
	l, roErr := spool.OpenReadOnly(spool.Config{Dir: filepath.Join(s.cfg.Dir, name), Logger: s.cfg.Logger})
	if roErr != nil {
		s.log.Error("stream not served", "stream", name, "err", err, "read_only_err", roErr)
		return
	}
	s.mu.Lock()
	s.ro[name] = l
	s.mu.Unlock()
	s.log.Error("stream damaged: appends refused, served read-only up to the damage until repaired", "stream", name, "err", err)
}

// Lookup returns the spool that serves stream name, read-only for a
// damaged one, without opening anything.
func (s *Set) Lookup(name string) (*spool.Log, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.logs[name]
	if !ok {
		l, ok = s.ro[name]
	}
	return l, ok
}

// Get returns the writer's spool of stream name, opening (creating) and
// advertising it on first use. A stream on disk that would not open gives
// its error each time, after trying again; a damaged one, served
// read-only, an error wrapping ErrDamaged and the spool.CorruptError.
func (s *Set) Get(name string) (*spool.Log, error) {
	s.mu.Lock()
	l, ok := s.logs[name] // only valid names are ever in the map
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q (want 1-128 of letters, digits, '.', '_', '-')", ErrBadName, name)
	}
	// Opening recovers the spool and re-advertises: slow work done
	// outside mu, so serving other streams goes on meanwhile.
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	closed = s.closed
	l, ok = s.logs[name]
	names := s.servedLocked()
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if ok {
		return l, nil
	}
	l, err := s.cfg.Open(name)
	if err != nil {
		s.mu.Lock()
		s.failed[name] = err
		_, damaged := s.ro[name]
		s.mu.Unlock()
		if damaged {
			return nil, fmt.Errorf("%w, served read-only up to the damage: %w", ErrDamaged, err)
		}
		return nil, err
	}
	if !slices.Contains(names, name) {
		names = append(names, name)
		sort.Strings(names)
	}
	if s.cfg.Advertise != nil {
		if err := s.cfg.Advertise(names); err != nil {
			l.Close()
			return nil, fmt.Errorf("fastmq: advertise stream %q: %w", name, err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil, ErrClosed
	}
	s.logs[name] = l
	delete(s.failed, name)
	ro := s.ro[name]
	delete(s.ro, name)
	s.mu.Unlock()
	if ro != nil {
		ro.Close() // repaired: the writer's log serves it now
	}
	s.log.Info("stream open", "stream", name, "offset", l.NextOffset())
	return l, nil
}

// Names returns the names of the streams open for appends, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.logs)
}

// Served returns the names of the streams served, damaged ones included,
// sorted: those the node advertises.
func (s *Set) Served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servedLocked()
}

func (s *Set) servedLocked() []string {
	names := sortedKeys(s.logs)
	names = append(names, sortedKeys(s.ro)...)
	sort.Strings(names)
	return names
}

func sortedKeys(m map[string]*spool.Log) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Failed is a stream that would not open: why, and its read-only spool
// when it is served up to its damage (nil otherwise).
type Failed struct {
	Err      error
	ReadOnly *spool.Log
}

// Snapshot returns the open streams and the failed ones, in maps of the
// caller's.
func (s *Set) Snapshot() (open map[string]*spool.Log, failed map[string]Failed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	open = make(map[string]*spool.Log, len(s.logs))
	for k, l := range s.logs {
		open[k] = l
	}
	failed = make(map[string]Failed, len(s.failed))
	for k, err := range s.failed {
		failed[k] = Failed{Err: err, ReadOnly: s.ro[k]}
	}
	return open, failed
}

// Close closes every spool (flushing and syncing the writers' queued
// appends); later Gets return ErrClosed. It returns the writers' errors.
func (s *Set) Close() error {
	s.openMu.Lock() // no stream is being opened: the maps no longer change
	defer s.openMu.Unlock()
	s.mu.Lock()
	s.closed = true
	logs, ro := s.logs, s.ro
	s.logs, s.ro = map[string]*spool.Log{}, map[string]*spool.Log{}
	s.mu.Unlock()
	for _, l := range ro {
		l.Close() // read-only: nothing to flush
	}
	var errs []error
	for name, l := range logs {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("fastmq: close stream %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
