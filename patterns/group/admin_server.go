package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/spool"
)

// AllStreams in a list request's stream frame lists the groups of every
// stream.
const AllStreams = "*"

// handleAdmin answers the operators' ops: list, dead letters, replay.
func (s *Server) handleAdmin(env [][]byte, req wire.Request) {
	fail := func(st wire.Status, format string, a ...any) {
		s.send(env, &wire.Reply{Status: st, ID: req.ID, Data: fmt.Appendf(nil, format, a...)})
	}
	if req.Op == wire.OpList {
		if req.Stream != AllStreams && !validName(req.Stream) {
			fail(wire.StatusBadRequest, "bad stream name %q", req.Stream)
			return
		}
		b, _ := json.Marshal(s.list(req.Stream))
		s.send(env, &wire.Reply{Status: wire.StatusOK, ID: req.ID, Data: b})
		return
	}
	if !validName(req.Stream) || !validName(req.Group) {
		fail(wire.StatusBadRequest, "bad stream %q or group %q", req.Stream, req.Group)
		return
	}
	dl, ok := s.cfg.Lookup(DLQStream(req.Stream, req.Group))
	if !ok {
		fail(wire.StatusUnknown, "no dead letters of group %s of stream %s", req.Group, req.Stream)
		return
	}
	switch req.Op {
	case wire.OpDLQ:
		recs, err := readDeadLetters(dl, req.StartValue, int(req.MaxRecords), int(req.MaxBytes))
		if err != nil {
			fail(wire.StatusInternal, "read dead letters: %v", err)
			return
		}
		s.send(env, &wire.Reply{Status: wire.StatusOK, ID: req.ID, Records: recs})
	case wire.OpReplay:
		l, ok := s.cfg.Lookup(req.Stream)
		if !ok {
			fail(wire.StatusUnknown, "unknown stream %s", req.Stream)
			return
		}
		s.mu.Lock()
		if s.closed || s.replaying {
			s.mu.Unlock()
			fail(wire.StatusUnavailable, "a replay is running, or the server is closing")
			return
		}
		s.replaying = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.replay(env, req, dl, l)
	}
}

// list returns the stats of every group of stream (AllStreams: of every
// stream) this publisher has state for, on disk or in memory.
func (s *Server) list(stream string) []GroupStats {
	s.loadAll()
	out := []GroupStats{}
	for _, st := range s.List() {
		if stream == AllStreams || st.Stream == stream {
			out = append(out, st)
		}
	}
	return out
}

// loadAll loads the state of every group on disk that this server has
// not loaded yet (of the streams it serves), within MaxGroups.
func (s *Server) loadAll() {
	files, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "*", "*.state"))
	for _, f := range files {
		stream, grp := filepath.Base(filepath.Dir(f)), strings.TrimSuffix(filepath.Base(f), ".state")
		if !validName(stream) || !validName(grp) {
			continue
		}
		l, ok := s.cfg.Lookup(stream)
		if !ok {
			continue
		}
		s.mu.Lock()
		if !s.closed && s.groups[stream+"\x00"+grp] == nil && len(s.groups) < MaxGroups {
			if _, err := s.groupLocked(wire.Request{Op: wire.OpInfo, Stream: stream, Group: grp}, l); err != nil {
				s.log.Warn("load group state", "stream", stream, "group", grp, "err", err)
			}
		}
		s.mu.Unlock()
	}
}

// readDeadLetters reads up to max records (at most maxFetchRecords, about
// maxBytes) of a dead-letter stream from offset from.
func readDeadLetters(dl *spool.Log, from uint64, max, maxBytes int) ([]wire.Record, error) {
	if max <= 0 || max > maxFetchRecords {
		max = maxFetchRecords
	}
	if maxBytes <= 0 || maxBytes > maxFetchBytes {
		maxBytes = maxFetchBytes
	}
	from = clampOffset(from, dl)
	end := dl.NextOffset()
	if from >= end {
		return nil, nil
	}
	rd, err := dl.NewReader(from)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []wire.Record
	size := 0
	for len(out) < max && size < maxBytes && rd.Offset() < end {
		r, err := rd.Next(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, wire.FromSpool(r, 0))
		size += len(r.Value) + 64
	}
	return out, nil
}

func clampOffset(o uint64, l *spool.Log) uint64 { return max(o, l.OldestOffset()) }

// ReplayResult is what a replay did (op replay's JSON data).
type ReplayResult struct {
	// From and To are the dead letters looked at: offsets [From, To) of
	// the dead-letter stream.
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Replayed dead letters had their records made pending again in the
	// group, at their own offsets: only this group gets them again.
	Replayed int `json:"replayed"`
	// Skipped dead letters had been replayed before (the group's state
	// keeps which), were pending in the group already, or were dead
	// letters of another stream or group.
	Skipped int `json:"skipped"`
	// Gone dead letters' records are no longer in the stream (retention
	// removed them): they cannot be replayed.
	Gone int `json:"gone,omitempty"`
}

// replayedVersion is the version of a group's replay file.
const replayedVersion = 1

// replayedPath is the file that kept, before replays went to the group's
// own state, which dead letters of a group were replayed, as spans of
// the dead-letter stream's offsets; still read, so that those are not
// replayed again.
func replayedPath(dir, stream, group string) string {
	return filepath.Join(dir, stream, group+".replayed")
}

// replay gives the dead letters [StartValue, StartValue+MaxRecords) (to
// the end when MaxRecords is 0) back to their group: each one's record is
// made pending again in the group's state, at its own offset, with its
// own id and headers, so that no other group of the stream sees it again.
// The reopened records and the dead letters noted as replayed are one
// snapshot: the answer comes once it is written, and a crash before
// leaves neither (the replay may be asked again), after it both: each
// dead letter is replayed once.
func (s *Server) replay(env [][]byte, req wire.Request, dl, l *spool.Log) {
	defer s.wg.Done()
	rep := s.doReplay(req, dl, l)
	// Done before the answer: a second replay sent once this one is
	// answered must not find it running.
	s.mu.Lock()
	s.replaying = false
	if rep.Status == wire.StatusOK {
		// Answered once the reopened records are on disk.
		s.replies = append(s.replies, pendingReply{env, wire.EncodeReply(rep)})
		s.mu.Unlock()
		s.wakeFlusher()
		return
	}
	s.mu.Unlock()
	s.send(env, rep)
}

// replayTarget is one dead letter to replay: its offset in the
// dead-letter stream, its record's in the stream, and its key.
type replayTarget struct {
	dlq, offset uint64
	key         string
}

func (s *Server) doReplay(req wire.Request, dl, l *spool.Log) *wire.Reply {
	fail := func(st wire.Status, err error) *wire.Reply {
		return &wire.Reply{Status: st, ID: req.ID, Data: fmt.Appendf(nil, "replay: %v", err)}
	}
	var before durable.SpanSet
	p := replayedPath(s.cfg.Dir, req.Stream, req.Group)
	if b, err := os.ReadFile(p); err == nil {
		var spans []durable.Span
		if _, err := fsutil.DecodeVersionedJSON(b, replayedVersion, &spans); err != nil {
			return fail(wire.StatusInternal, fmt.Errorf("%s: %w", filepath.Base(p), err))
		}
		before = durable.SpanSet(spans)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(wire.StatusInternal, err)
	}
	res := ReplayResult{From: clampOffset(req.StartValue, dl), To: dl.NextOffset()}
	if req.MaxRecords > 0 && res.From+uint64(req.MaxRecords) < res.To {
		res.To = res.From + uint64(req.MaxRecords)
	}
	res.To = max(res.To, res.From)
	var targets []replayTarget
	if res.From < res.To {
		rd, err := dl.NewReader(res.From)
		if err != nil {
			return fail(wire.StatusInternal, err)
		}
		for rd.Offset() < res.To {
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			r, err := rd.Next(ctx)
			cancel()
			if err != nil {
				rd.Close()
				return fail(wire.StatusInternal, err)
			}
			if r.Offset >= res.To {
				break
			}
			off, perr := strconv.ParseUint(headerOf(r.Headers, HeaderDLQOffset), 10, 64)
			if before.Has(r.Offset) || perr != nil || headerOf(r.Headers, HeaderDLQStream) != req.Stream ||
				headerOf(r.Headers, HeaderDLQGroup) != req.Group {
				res.Skipped++
				continue
			}
			targets = append(targets, replayTarget{dlq: r.Offset, offset: off, key: keyOf(r.Headers)})
		}
		rd.Close()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fail(wire.StatusUnavailable, ErrClosed)
	}
	g, err := s.groupLocked(wire.Request{Op: wire.OpInfo, Stream: req.Stream, Group: req.Group}, l)
	if err != nil || g == nil {
		s.mu.Unlock()
		if err != nil {
			return fail(wire.StatusInternal, err)
		}
		return fail(wire.StatusUnknown, fmt.Errorf("unknown group %s of stream %s", req.Group, req.Stream))
	}
	now := time.Now()
	oldest := l.OldestOffset()
	for _, t := range targets {
		switch {
		case g.Replayed.Has(t.dlq):
			res.Skipped++
			continue
		case t.offset < oldest:
			res.Gone++
			continue
		case g.Reopen(t.offset, t.key, now):
			res.Replayed++
		default:
			res.Skipped++ // pending already: it is delivered anyway
		}
		g.Replayed.Add(t.dlq)
	}
	g.Dirty, g.NeedSnap = true, true // the replayed notes, even with nothing reopened
	if res.Replayed > 0 {
		s.log.Info("dead letters replayed to their group", "stream", req.Stream, "group", req.Group, "records", res.Replayed)
		s.kickLocked(g, l)
		s.wakeAtLocked(now)
	}
	s.unlockAndSend()
	b, _ := json.Marshal(res)
	return &wire.Reply{Status: wire.StatusOK, ID: req.ID, Data: b}
}

func headerOf(hs []spool.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
