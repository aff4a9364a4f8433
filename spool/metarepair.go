package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// metaVerify is meta.json as Verify read it, before the segments: a
// writer running meanwhile only raises the checkpoint, which then never
// exceeds the data Verify reads after it.
type metaVerify struct {
	m   meta
	ok  bool
	err error
}

func readMetaVerify(dir string) metaVerify {
	m, ok, err := readMeta(dir)
	return metaVerify{m, ok, err}
}

// check adds to rep what is wrong with dir's meta.json: a file that cannot
// be read, or acknowledged records missing because the data ends below the
// recovery checkpoint (which preallocated zeros would otherwise make look
// like the clean end of the data). bases are the segments Verify checked.
func (mv metaVerify) check(dir string, bases []uint64, rep *Report) {
	m, ok, err := mv.m, mv.ok, mv.err
	if err != nil {
		rep.Damaged = append(rep.Damaged, Damage{Segment: metaFileName, Reason: strings.TrimPrefix(err.Error(), "spool: ")})
		return
	}
	if !ok || m.Acked <= rep.Next {
		return
	}
	d := Damage{Offset: rep.Next, Reason: fmt.Sprintf(
		"acknowledged offsets %d..%d (%d records) are missing: the data ends below the recovery checkpoint in %s (a zero-filled or cut tail)",
		rep.Next, m.Acked-1, m.Acked-rep.Next, metaFileName)}
	if len(bases) > 0 {
		base := bases[len(bases)-1]
		d.Segment, d.Pos = segName(base), dataEnd(dir, base)
	}
	rep.Damaged = append(rep.Damaged, d)
}

// dataEnd returns the end of the structurally valid batches of a segment
// (headers only; 0 when it cannot be read).
func dataEnd(dir string, base uint64) int64 {
	f, err := os.Open(filepath.Join(dir, segName(base)))
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < segHeaderLen {
		return 0
	}
	res, err := scanSegment(f, segName(base), segHeaderLen, fi.Size(), base, false, verifyMaxBatch)
	if err != nil {
		return 0
	}
	return res.end
}

// logEnds returns the first and next offset of the (repaired) log in dir:
// the first segment's base and the end of the valid prefix of the last.
func logEnds(dir string) (oldest, next uint64, err error) {
	bases, err := listSegments(dir)
	if err != nil || len(bases) == 0 {
		return 0, 0, err
	}
	c, err := checkSegment(dir, bases[len(bases)-1], 0, true)
	if err != nil {
		return 0, 0, err
	}
	return bases[0], c.goodNext, nil
}

// repairMeta runs at the end of Repair (the lock held): a damaged meta.json
// is moved to quarantine/ and replaced by a new identity; acknowledged
// records found missing at the end (the data ends below the checkpoint) are
// reported in rep.Lost; whenever Repair removed or found missing anything,
// a new epoch starts at the log's end and the checkpoint is lowered to it,
// durably, before any writer can hand out those offsets again.
func repairMeta(dir string, logger *slog.Logger, rep *RepairReport) error {
	m, ok, err := readMeta(dir)
	var me *MetaError
	if errors.As(err, &me) {
		qdir := filepath.Join(dir, "quarantine")
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			return fmt.Errorf("spool: create quarantine: %w", err)
		}
		rep.MetaQuarantined = filepath.Join("quarantine", fmt.Sprintf("%s.damaged-%d", metaFileName, time.Now().UnixNano()))
		if err := os.Rename(filepath.Join(dir, metaFileName), filepath.Join(dir, rep.MetaQuarantined)); err != nil {
			return fmt.Errorf("spool: quarantine state file: %w", err)
		}
		if err := fsyncDir(qdir); err != nil {
			return err
		}
		if err := fsyncDir(dir); err != nil {
			return err
		}
		logger.Error("damaged state file moved aside; the log gets a new identity", "file", rep.MetaQuarantined, "reason", me.Reason)
	} else if err != nil {
		return err
	}
	oldest, end, err := logEnds(dir)
	if err != nil {
		return err
	}
	if !ok {
		m = newMeta(oldest)
	}
	if m.Acked > end {
		rep.Lost = append(rep.Lost, Removed{From: end, To: m.Acked})
		logger.Error("acknowledged records lost: the data ends below the recovery checkpoint",
			"offset", end, "to", m.Acked, "records", m.Acked-end)
		m.Acked = end
	}
	if len(rep.Actions) == 0 && len(rep.Lost) == 0 && rep.MetaQuarantined == "" {
		if ok {
			rep.Epoch, rep.EpochStart = m.current().Epoch, m.current().Start
		}
		return nil // nothing changed: meta.json stays as it was (or absent)
	}
	rep.NewID = !ok
	if len(rep.Actions) > 0 || len(rep.Lost) > 0 {
		e := m.bump(end)
		m.Open = false // the new epoch at the end covers what a crashed writer may have lost
		rep.NewEpoch = true
		logger.Warn("new epoch", "epoch", e.Epoch, "offset", e.Start)
	}
	rep.Epoch, rep.EpochStart = m.current().Epoch, m.current().Start
	return writeMeta(dir, m)
}
