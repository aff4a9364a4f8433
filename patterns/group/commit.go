package group

import (
	"cmp"
	"context"
	"log/slog"
	"slices"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
)

// A group commit (flush) writes, for every group that changed, one
// journal entry, or a snapshot and a new journal when the group is new,
// was loaded, changed its settings or its journal passed journalLimit.

// entryWrite is one journal entry for the flusher to write.
type entryWrite struct {
	key   string
	j     *durable.Journal
	b     []byte
	floor uint64 // the group's floor once the entry is written
}

// snapWrite is one snapshot for the flusher to write, with a new journal.
type snapWrite struct {
	key string
	f   durable.File
}

// setDurable records, for Floors, the floor of every group whose write
// did not fail.
func (s *Server) setDurable(floors map[string]uint64, failed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, floor := range floors {
		if g := s.groups[key]; g != nil && !slices.Contains(failed, key) {
			g.Durable = floor
		}
	}
}

// flush runs one group commit; see flushLoop.
func (s *Server) flush() error {
	// Take the replies, the dead letters and the changes together: a
	// change that settles a dead letter is written only after its
	// append, and a reply only after the write that holds its change.
	s.mu.Lock()
	replies, dlq := s.replies, s.dlq
	s.replies, s.dlq = nil, nil
	var writes []entryWrite
	var snaps []snapWrite
	for key, g := range s.groups {
		if !g.Dirty {
			continue
		}
		g.Dirty = false
		j := s.journals[key]
		if j != nil && !g.NeedSnap && j.Gen == g.Gen && g.Set.Equal(&g.Written) && j.Size < durable.JournalLimit {
			e, ok := g.Changes()
			if !ok {
				continue
			}
			if b := durable.AppendEntry(nil, &e); len(b) <= durable.EntryHdrLen+durable.MaxEntryLen {
				writes = append(writes, entryWrite{key, j, b, g.Floor})
				continue
			}
		}
		g.Gen++
		g.NeedSnap = false
		g.Written = g.Set
		g.Written.Backoff = slices.Clone(g.Set.Backoff)
		g.Forget()
		snaps = append(snaps, snapWrite{key, g.Snapshot()})
	}
	s.mu.Unlock()
	var firstErr error
	retry := dlq[:0] // the dead letters to append again: those that failed
	for _, d := range dlq {
		if err := s.deadLetter(d); err != nil {
			s.log.Error("append dead letter", "stream", d.stream, "group", d.group, "offset", d.offset, "err", err)
			firstErr = cmp.Or(firstErr, err)
			retry = append(retry, d)
		}
	}
	var failed []string
	if firstErr == nil {
		for _, w := range writes {
			if err := w.j.Append(w.b); err != nil {
				firstErr = cmp.Or(firstErr, err)
				failed = append(failed, w.key)
				w.j.Close()
				delete(s.journals, w.key)
			}
		}
		for _, sn := range snaps {
			if err := s.compact(sn.key, sn.f); err != nil {
				firstErr = cmp.Or(firstErr, err)
				failed = append(failed, sn.key)
			}
		}
	} else {
		for _, w := range writes {
			failed = append(failed, w.key)
		}
		for _, sn := range snaps {
			failed = append(failed, sn.key)
		}
	}
	if firstErr != nil {
		s.mu.Lock()
		s.dlq = append(retry, s.dlq...) // tried again with the next commit
		for _, key := range failed {
			if g := s.groups[key]; g != nil {
				// The changes were taken: the next commit writes them
				// all, as a snapshot.
				g.NeedSnap, g.Dirty = true, true
			}
		}
		s.mu.Unlock()
	}
	floors := make(map[string]uint64, len(writes)+len(snaps))
	for _, w := range writes {
		floors[w.key] = w.floor
	}
	for _, sn := range snaps {
		floors[sn.key] = sn.f.Floor
	}
	s.setDurable(floors, failed)
	for _, r := range replies {
		frames := r.frames
		if firstErr != nil && frames[0][1] == byte(wire.StatusOK) && !isFetchReply(frames) {
			frames = wire.EncodeReply(&wire.Reply{Status: wire.StatusInternal, ID: idOf(frames[0]), Data: []byte(firstErr.Error())})
		}
		if err := s.cfg.Send.Send(r.env, frames); err != nil && s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("send reply failed", "err", err)
		}
	}
	return firstErr
}

// compact writes a group's snapshot and starts its new journal: the
// journal first (empty), then the snapshot that names it, then the old
// journal goes. A crash between leaves the old snapshot and its journal
// in force.
func (s *Server) compact(key string, f durable.File) error {
	j, err := durable.CreateJournal(s.cfg.Dir, f.Stream, f.Group, f.Journal)
	if err != nil {
		return err
	}
	if err := durable.Write(s.cfg.Dir, f); err != nil {
		j.Close()
		return err
	}
	if old := s.journals[key]; old != nil {
		old.Close()
	}
	s.journals[key] = j
	if err := s.known.add(f.Stream, f.Group); err != nil {
		s.log.Error("note the group in the known-groups file: a loss of its state would go unnoticed", "stream", f.Stream, "group", f.Group, "err", err)
	}
	if err := durable.RemoveOtherJournals(s.cfg.Dir, f.Stream, f.Group, f.Journal); err != nil {
		s.log.Warn("remove old journals", "stream", f.Stream, "group", f.Group, "err", err)
	}
	return nil
}
