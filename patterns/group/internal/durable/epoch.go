package durable

import (
	"os"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/spool"
)

// A group's state follows its stream's epochs. A group leases records
// once written, before their fdatasync (unless
// ServerConfig.LeaseAfterSync), and a stream opened with
// spool.Config.VisibleBeforeSync serves them so to every reader, so a
// group can lease and acknowledge records (and write that to its
// own journal, which has its own fdatasync) that an OS crash then takes
// from the stream. The stream reopens at its durable end with a new epoch
// (see the spool package doc), and new records take the lost offsets. A
// group whose cursor had passed them would skip those new records without
// a word. So every snapshot names the stream's epoch it was written in
// (fileState.LogEpoch; the journal entries after it are of the same
// run), and a state loaded from disk is cut back to where its epoch
// ended: what it held beyond is about records that are gone. The same cut
// applies when its cursor is past the end of the log, whatever the
// reason (a log rebuilt without its history).

// FollowEpoch cuts g, just loaded from disk, back to the end of the
// stream's epoch it was written in, and makes it of the log's current
// epoch; it returns where it cut and true if it did. Called with the
// server's mutex held, before the group serves anything.
func FollowEpoch(g *State, l *spool.Log) (uint64, bool) {
	end, cut := l.WrittenOffset(), false
	if g.EpochKnown {
		if e, ok := l.EpochEnd(g.Epoch); ok && e < end {
			end = e
		}
	}
	if g.Next > end {
		g.Truncate(end)
		cut = true
	}
	g.Epoch, _ = l.Epoch()
	g.EpochKnown = true
	return end, cut
}

// Truncate drops what g holds from end on: the cursor moves back to end,
// settled spans and pending records above it go. Only for a state just
// loaded: no leases are held, no key queues are built.
func (g *State) Truncate(end uint64) {
	for o := range g.Pend {
		if o >= end {
			delete(g.Pend, o)
			g.Avail--
		}
	}
	k := 0
	for _, sp := range g.Done {
		if sp.From >= end {
			break
		}
		sp.To = min(sp.To, end)
		g.Done[k] = sp
		k++
	}
	g.Done = g.Done[:k]
	g.Next = end
	g.Floor = min(g.Floor, end)
	g.Durable = min(g.Durable, end)
	g.NeedSnap, g.Dirty = true, true
}

// FloorInEpoch is a snapshot's floor as of the log: cut back to where the
// snapshot's epoch ended (see followEpoch), for Floors.
func FloorInEpoch(f *File, l *spool.Log) uint64 {
	floor := min(f.Floor, l.WrittenOffset())
	if f.LogEpoch != nil {
		if e, ok := l.EpochEnd(*f.LogEpoch); ok {
			floor = min(floor, e)
		}
	}
	return floor
}

// SnapshotFloor returns the floor a group's snapshot holds: at or below
// its true floor (its journal only moves the floor on; a seek writes a
// snapshot), cut back to the end of the stream's epoch it was written in
// (see followEpoch). The journal is not read: Floors must not race the flusher
// that appends to it. A snapshot that does not read or decode gives 0,
// which keeps everything.
func SnapshotFloor(dir, stream, group string, lookup func(string) (*spool.Log, bool)) uint64 {
	b, err := os.ReadFile(Path(dir, stream, group))
	if err != nil {
		return 0
	}
	var f File
	if _, err := fsutil.DecodeVersionedJSON(b, FileVersion, &f); err != nil {
		return 0
	}
	if l, ok := lookup(stream); ok {
		return FloorInEpoch(&f, l)
	}
	return f.Floor
}
