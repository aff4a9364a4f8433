package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// Replayed records were appended to the stream, at offsets
	// [First, First+Replayed).
	Replayed int    `json:"replayed"`
	First    uint64 `json:"first,omitempty"`
	// Skipped dead letters had been replayed before (the publisher keeps
	// which, per group), or were dead letters of another stream.
	Skipped int `json:"skipped"`
}

// replayedVersion is the version of a group's replay file.
const replayedVersion = 1

// replayedPath is the file that keeps which dead letters of a group were
// replayed, as spans of the dead-letter stream's offsets.
func replayedPath(dir, stream, group string) string {
	return filepath.Join(dir, stream, group+".replayed")
}

// replay appends the dead letters [StartValue, StartValue+MaxRecords) (to
// the end when MaxRecords is 0) back to their stream, with their headers
// minus the dead-letter ones, skipping those replayed before; then it
// notes them as replayed and answers. A crash between the append and the
// note replays the batch again: at least once.
func (s *Server) replay(env [][]byte, req wire.Request, dl, l *spool.Log) {
	defer s.wg.Done()
	res, err := s.doReplay(req, dl, l)
	// Done before the answer: a second replay sent once this one is
	// answered must not find it running.
	s.mu.Lock()
	s.replaying = false
	s.mu.Unlock()
	if err != nil {
		s.send(env, &wire.Reply{Status: wire.StatusInternal, ID: req.ID, Data: fmt.Appendf(nil, "replay: %v (%d replayed before the error)", err, res.Replayed)})
		return
	}
	b, _ := json.Marshal(res)
	s.send(env, &wire.Reply{Status: wire.StatusOK, ID: req.ID, Data: b})
}

func (s *Server) doReplay(req wire.Request, dl, l *spool.Log) (ReplayResult, error) {
	var done durable.SpanSet
	p := replayedPath(s.cfg.Dir, req.Stream, req.Group)
	if b, err := os.ReadFile(p); err == nil {
		var spans []durable.Span
		if _, err := fsutil.DecodeVersionedJSON(b, replayedVersion, &spans); err != nil {
			return ReplayResult{}, fmt.Errorf("%s: %w", p, err)
		}
		done = durable.SpanSet(spans)
	} else if !errors.Is(err, os.ErrNotExist) {
		return ReplayResult{}, err
	}
	res := ReplayResult{From: clampOffset(req.StartValue, dl), To: dl.NextOffset()}
	if req.MaxRecords > 0 && res.From+uint64(req.MaxRecords) < res.To {
		res.To = res.From + uint64(req.MaxRecords)
	}
	if res.From >= res.To {
		res.To = res.From
		return res, nil
	}
	rd, err := dl.NewReader(res.From)
	if err != nil {
		return res, err
	}
	defer rd.Close()
	const batch = 256
	var recs []spool.Record
	var offs []uint64
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		first, err := l.Append(ctx, recs...)
		cancel()
		if err != nil {
			return err
		}
		if res.Replayed == 0 {
			res.First = first
		}
		res.Replayed += len(recs)
		for _, o := range offs {
			done.Add(o)
		}
		recs, offs = recs[:0], offs[:0]
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return fsutil.WriteVersionedJSON(p, replayedVersion, []durable.Span(done), 0o644)
	}
	for rd.Offset() < res.To {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		r, err := rd.Next(ctx)
		cancel()
		if err != nil {
			return res, err
		}
		if r.Offset >= res.To {
			break
		}
		if done.Has(r.Offset) || headerOf(r.Headers, HeaderDLQStream) != req.Stream {
			res.Skipped++
			continue
		}
		recs = append(recs, spool.Record{Value: r.Value, Headers: withoutDLQHeaders(r.Headers)})
		offs = append(offs, r.Offset)
		if len(recs) == batch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

func headerOf(hs []spool.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// withoutDLQHeaders returns hs without the dead-letter headers, nor the
// idempotence ones: a replay appends the record anew, which its message id
// (still in the window) or its producer's sequence would refuse as a
// duplicate.
func withoutDLQHeaders(hs []spool.Header) []spool.Header {
	return withoutHeaders(hs, HeaderDLQStream, HeaderDLQOffset, HeaderDLQGroup, HeaderDLQDeliveries, HeaderDLQReason,
		HeaderDLQLastReason, HeaderDLQHistory,
		spool.HeaderMsgID, spool.HeaderProducer)
}
