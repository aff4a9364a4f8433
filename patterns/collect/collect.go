// Package collect is the collector half of log shipping: it pulls a stream
// from every publisher in the mesh and appends each record as a line to one
// file per publisher, exactly once across restarts.
//
// Next to each output file NAME.log, the collector keeps NAME.log.pos: the
// next offset to pull and the file's size at that point, written crash-safely
// (temp file, fsync, rename, directory fsync) only after the output file was
// synced. On start, a file longer than its recorded size — lines written
// after the last recorded position by a collector that then crashed — is
// truncated to that size and pulling resumes at the recorded offset, so no
// line is lost or repeated.
//
// # Position file format
//
// NAME.log.pos is a small JSON file written through the shared versioned
// state-file helper (version 2):
//
//	{"version":2,"data":{"next":N,"size":S,"log_id":"UUID","epoch":E,"fresh":true}}
//
// next is the offset of the next record to pull from the publisher, size
// the length in bytes of NAME.log holding exactly the records before next,
// log_id and epoch the identity of the publisher's log and the epoch of
// the record before next (omitted while unknown), and fresh (omitted when
// false) marks a position recorded before the first sync, when nothing was
// pulled yet. The collector resumes with the log identity and epoch, so a
// publisher whose log lost its tail (offsets now naming other records) or
// was replaced is noticed, not continued blindly (see "Log identity and
// epochs" in package pull). Version 1 has no log_id and epoch, and a file
// from before versioning holds the bare object {"next":N,"size":S}: both
// are read, and resume with the bare offset as before. A file with a
// version above 2, written by a newer collector, is refused with an error
// rather than guessed at.
//
// A publisher whose log lost records already collected (same log, a cut
// tail) sends the new records at those offsets: they are appended after
// the lines already written, with a warning, since both are records the
// publisher served. A publisher that now serves another log rotates the
// output file aside (NAME.log.N) and starts a new one.
package collect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// Config configures a Collector.
type Config struct {
	// Dir receives one file per publisher. Required.
	Dir string
	// Stream to collect. Required.
	Stream string
	// Name of the collector, for logs. Default "collect".
	Name string
	// Discovery finds the publishers; or use Publishers (name → endpoint).
	Discovery  pull.StreamWatcher
	Publishers map[string]string
	// Start applies to publishers with no recorded position. Default
	// earliest.
	Start spool.Start
	// FlushInterval bounds how long a line waits before it is synced and
	// its position recorded. Default 200ms.
	FlushInterval time.Duration
	// MaxBatch syncs after this many lines even before FlushInterval.
	// Default 65536.
	MaxBatch int
	// Socket configures the consumer's sockets.
	Socket socket.Config
	// Logger receives the collector's logs; nil discards them.
	Logger *slog.Logger
}

// Stats are a collector's counters.
type Stats struct {
	Lines   uint64            // lines written since start
	Files   map[string]uint64 // per publisher: next offset recorded
	Flushes uint64
}

// Collector writes a stream to per-publisher files. Run it with Run; stop
// it by cancelling Run's context, then Close. Stats is safe for concurrent
// use; Run must not be called twice.
type Collector struct {
	cfg  Config
	log  *slog.Logger
	cons *pull.Consumer

	mu      sync.Mutex
	files   map[string]*outFile
	openErr map[string]error
	lines   uint64
	flush   uint64
	closed  bool
}

type outFile struct {
	f     *os.File
	w     *bufio.Writer
	path  string
	size  int64     // bytes written (buffered included)
	next  uint64    // next offset after the last written line
	saved uint64    // next offset recorded in the .pos file
	logID uuid.UUID // the publisher's log next is in; zero while unknown
	epoch uint32    // epoch of the record before next
	dirty bool
	fresh bool // nothing synced yet: start per Config.Start
}

type posFile struct {
	Next uint64 `json:"next"`
	Size int64  `json:"size"`
	// LogID and Epoch are the publisher's log and the epoch of the record
	// before Next (version 2; empty while unknown).
	LogID string `json:"log_id,omitempty"`
	Epoch uint32 `json:"epoch,omitempty"`
	// Fresh marks a file to which nothing was synced yet: its position is
	// not a real one, and the consumer's Start applies.
	Fresh bool `json:"fresh,omitempty"`
}

// New opens the output directory, restores recorded positions (truncating
// files that ran ahead of them) and starts pulling.
func New(cfg Config) (*Collector, error) {
	if cfg.Dir == "" || cfg.Stream == "" {
		return nil, errors.New("collect: Dir and Stream are required")
	}
	if cfg.Name == "" {
		cfg.Name = "collect"
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 200 * time.Millisecond
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 65536
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	c := &Collector{cfg: cfg, log: lg.With("component", "collect", "stream", cfg.Stream), files: make(map[string]*outFile), openErr: make(map[string]error)}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("collect: create %s: %w", cfg.Dir, err)
	}
	cons, err := pull.NewConsumer(pull.ConsumerConfig{
		Stream:         cfg.Stream,
		Name:           cfg.Name,
		ResumePosition: c.resumePosition,
		Resume:         c.resume,
		Start:          cfg.Start,
		Discovery:      cfg.Discovery,
		Publishers:     cfg.Publishers,
		CommitInterval: -1,
		Socket:         cfg.Socket,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	c.cons = cons
	return c, nil
}

// fileName maps a publisher name to a file name: distinct names give
// distinct files, and no name escapes the directory.
func fileName(publisher string) string {
	name := url.PathEscape(publisher)
	if strings.HasPrefix(name, ".") {
		name = "%2E" + name[1:]
	}
	return name + ".log"
}

// resumePosition opens (or creates) the publisher's file and returns its
// recorded position with its log identity and epoch. A position recorded
// without them (a version 1 file) is left to resume. Called by the
// consumer before it pulls from a publisher.
func (c *Collector) resumePosition(publisher string) (spool.Position, bool) {
	next, ok := c.resume(publisher)
	if !ok {
		return spool.Position{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	of := c.files[publisher]
	if of.logID == (uuid.UUID{}) {
		return spool.Position{}, false
	}
	return spool.Position{Next: next, ID: of.logID, Epoch: of.epoch}, true
}

// resume opens (or creates) the publisher's file and returns its recorded
// next offset.
func (c *Collector) resume(publisher string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if of, ok := c.files[publisher]; ok {
		return of.next, true
	}
	of, ok, err := c.open(publisher)
	if err != nil {
		// Run ends with this error when the publisher's first record comes.
		c.openErr[publisher] = err
		return 0, false
	}
	c.files[publisher] = of
	return of.next, ok && !of.fresh
}

// readPos reads an output file's position file (path without ".pos");
// ok is false when there is none.
func readPos(path string) (pos posFile, ok bool, err error) {
	b, err := os.ReadFile(path + ".pos")
	if errors.Is(err, os.ErrNotExist) {
		return pos, false, nil
	}
	if err != nil {
		return pos, false, fmt.Errorf("collect: read %s.pos: %w", path, err)
	}
	if _, err := fsutil.DecodeVersionedJSON(b, posVersion, &pos); errors.Is(err, fsutil.ErrUnknownVersion) {
		return pos, false, fmt.Errorf("collect: position file %s.pos was written by a newer collector: %w", path, err)
	} else if err != nil {
		return pos, false, fmt.Errorf("collect: position file %s.pos is damaged: %w", path, err)
	}
	return pos, true, nil
}

// Collected returns the records the collector in dir has synced to its
// output files (the sum of their recorded positions), read from the
// position files: for watching a collector from another process.
func Collected(dir string) (uint64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pos"))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, f := range files {
		pos, ok, err := readPos(strings.TrimSuffix(f, ".pos"))
		if err != nil {
			return n, err
		}
		if ok {
			n += pos.Next
		}
	}
	return n, nil
}

func (c *Collector) open(publisher string) (*outFile, bool, error) {
	path := filepath.Join(c.cfg.Dir, fileName(publisher))
	pos, recorded, err := readPos(path)
	if err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("collect: open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	size := fi.Size()
	if recorded && size > pos.Size {
		c.log.Warn("output ran ahead of its recorded position, truncating", "segment", path, "size", size, "recorded", pos.Size)
		if err := f.Truncate(pos.Size); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("collect: truncate %s: %w", path, err)
		}
		size = pos.Size
	} else if recorded && size < pos.Size {
		f.Close()
		return nil, false, fmt.Errorf("collect: %s is %d bytes, shorter than its recorded %d: the file lost data", path, size, pos.Size)
	} else if !recorded && size > 0 {
		f.Close()
		return nil, false, fmt.Errorf("collect: %s exists without a position file; move it away to collect again", path)
	}
	if _, err := f.Seek(size, 0); err != nil {
		f.Close()
		return nil, false, err
	}
	if !recorded {
		// Record the empty start before anything is written, so a crash
		// before the first sync leaves a file that can be truncated back.
		if err := writePos(path+".pos", posFile{Next: 0, Size: 0, Fresh: true}); err != nil {
			f.Close()
			return nil, false, err
		}
	}
	of := &outFile{f: f, w: bufio.NewWriterSize(f, 256<<10), path: path, size: size, next: pos.Next, saved: pos.Next, epoch: pos.Epoch, fresh: !recorded || pos.Fresh}
	if pos.LogID != "" {
		if of.logID, err = uuid.Parse(pos.LogID); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("collect: position file %s.pos is damaged: log_id: %w", path, err)
		}
	}
	return of, recorded, nil
}

// Run pulls and writes until ctx ends. It always returns a non-nil error:
// ctx.Err() after a clean stop, with everything written synced.
func (c *Collector) Run(ctx context.Context) error {
	pending := 0
	lastFlush := time.Now()
	for {
		wctx, cancel := context.WithDeadline(ctx, lastFlush.Add(c.cfg.FlushInterval))
		m, err := c.cons.Next(wctx)
		cancel()
		if err == nil {
			if err := c.write(m); err != nil {
				return errors.Join(err, c.sync())
			}
			// The collector's own position files, not the consumer's
			// offsets, say what is done; Ack only keeps its stats.
			c.cons.Ack(m)
			pending++
		}
		if err != nil && ctx.Err() != nil {
			return errors.Join(ctx.Err(), c.sync())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return errors.Join(err, c.sync())
		}
		if cerr := c.cons.Err(); cerr != nil {
			return errors.Join(cerr, c.sync())
		}
		if pending >= c.cfg.MaxBatch || time.Since(lastFlush) >= c.cfg.FlushInterval {
			if err := c.sync(); err != nil {
				return err
			}
			pending = 0
			lastFlush = time.Now()
		}
	}
}

func (c *Collector) write(m pull.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	of := c.files[m.Publisher]
	if of == nil {
		if err := c.openErr[m.Publisher]; err != nil {
			return err
		}
		return fmt.Errorf("collect: record from %s before its file was opened", m.Publisher)
	}
	if m.Reset {
		if m.Offset < of.next && m.LogID == of.logID && m.LogID != (uuid.UUID{}) {
			// The same log lost its tail: the offsets from m.Offset now
			// name new records. Those already written stay; the new
			// ones follow them.
			c.log.Warn("publisher's log lost records already collected; their offsets now hold new records, appended after them", "peer", m.Publisher, "offset", m.Offset, "to", of.next)
		} else if m.Offset < of.next {
			// The publisher's log was replaced: its offsets start again.
			// Keep what was collected under another name and start a new
			// file, rather than drop the new log's first records.
			if err := c.rotate(m.Publisher, of); err != nil {
				return err
			}
			of = c.files[m.Publisher]
		} else if m.Offset > of.next {
			c.log.Error("records lost to the publisher's retention", "peer", m.Publisher, "offset", of.next, "resumed", m.Offset)
		}
	} else if m.Offset < of.next {
		return nil // already written (a re-fetch after a reconnect)
	}
	of.w.Write(m.Value)
	of.w.WriteByte('\n')
	of.size += int64(len(m.Value)) + 1
	of.next = m.Offset + 1
	of.logID, of.epoch = m.LogID, m.Epoch
	of.dirty = true
	c.lines++
	return nil
}

// rotate moves a publisher's file and position aside (to NAME.log.N) and
// opens a new, empty one. Called with c.mu held.
func (c *Collector) rotate(publisher string, of *outFile) error {
	if err := of.w.Flush(); err != nil {
		return fmt.Errorf("collect: write %s: %w", of.path, err)
	}
	if err := of.f.Sync(); err != nil {
		return fmt.Errorf("collect: sync %s: %w", of.path, err)
	}
	of.f.Close()
	var aside string
	for i := 1; ; i++ {
		aside = fmt.Sprintf("%s.%d", of.path, i)
		if _, err := os.Stat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err := os.Rename(of.path, aside); err != nil {
		return fmt.Errorf("collect: rotate %s: %w", of.path, err)
	}
	if err := os.Rename(of.path+".pos", aside+".pos"); err != nil {
		return fmt.Errorf("collect: rotate %s: %w", of.path, err)
	}
	c.log.Warn("publisher log was replaced, output rotated", "peer", publisher, "segment", aside)
	nf, _, err := c.open(publisher)
	if err != nil {
		return err
	}
	nf.fresh = false
	c.files[publisher] = nf
	return nil
}

// sync flushes and syncs every dirty file and records its position.
func (c *Collector) sync() error {
	c.mu.Lock()
	var errs []error
	for _, of := range c.files {
		if !of.dirty {
			continue
		}
		if err := of.w.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("collect: write %s: %w", of.path, err))
			continue
		}
		if err := of.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("collect: sync %s: %w", of.path, err))
			continue
		}
		pos := posFile{Next: of.next, Size: of.size, Epoch: of.epoch}
		if of.logID != (uuid.UUID{}) {
			pos.LogID = of.logID.String()
		}
		if err := writePos(of.path+".pos", pos); err != nil {
			errs = append(errs, err)
			continue
		}
		of.saved = of.next
		of.dirty = false
		of.fresh = false
	}
	c.flush++
	c.mu.Unlock()
	return errors.Join(errs...)
}

// Stats returns the collector's counters.
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Lines: c.lines, Flushes: c.flush, Files: make(map[string]uint64, len(c.files))}
	for pub, of := range c.files {
		st.Files[pub] = of.saved
	}
	return st
}

// Consumer returns the collector's consumer, for its per-publisher stats.
func (c *Collector) Consumer() *pull.Consumer { return c.cons }

// Close stops pulling and closes the files. Lines written since the last
// sync are flushed and synced first. Close is idempotent.
func (c *Collector) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.cons.Close()
	serr := c.sync()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, of := range c.files {
		if e := of.f.Close(); e != nil {
			errs = append(errs, e)
		}
	}
	return errors.Join(append(errs, err, serr)...)
}

// posVersion is the format version of the .pos files this build writes
// and the highest it reads (see the package doc).
const posVersion = 2

// writePos replaces the position file name with pos crash-safely.
func writePos(name string, pos posFile) error {
	if err := fsutil.WriteVersionedJSON(name, posVersion, pos, 0o644); err != nil {
		return fmt.Errorf("collect: write position: %w", err)
	}
	return nil
}
