package group

import "github.com/fastmq/fastmq/spool"

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

// followEpoch cuts g, just loaded from disk, back to the end of the
// stream's epoch it was written in, and makes it of the log's current
// epoch; it returns where it cut and true if it did. Called with the
// server's mutex held, before the group serves anything.
func followEpoch(g *state, l *spool.Log) (uint64, bool) {
	end, cut := l.WrittenOffset(), false
	if g.epochKnown {
		if e, ok := l.EpochEnd(g.epoch); ok && e < end {
			end = e
		}
	}
	if g.next > end {
		g.truncate(end)
		cut = true
	}
	g.epoch, _ = l.Epoch()
	g.epochKnown = true
	return end, cut
}

// truncate drops what g holds from end on: the cursor moves back to end,
// settled spans and pending records above it go. Only for a state just
// loaded: no leases are held, no key queues are built.
func (g *state) truncate(end uint64) {
	for o := range g.pend {
		if o >= end {
			delete(g.pend, o)
			g.avail--
		}
	}
	k := 0
	for _, sp := range g.done {
		if sp.From >= end {
			break
		}
		sp.To = min(sp.To, end)
		g.done[k] = sp
		k++
	}
	g.done = g.done[:k]
	g.next = end
	g.floor = min(g.floor, end)
	g.durable = min(g.durable, end)
	g.needSnap, g.dirty = true, true
}

// floorInEpoch is a snapshot's floor as of the log: cut back to where the
// snapshot's epoch ended (see followEpoch), for Floors.
func floorInEpoch(f *fileState, l *spool.Log) uint64 {
	floor := min(f.Floor, l.WrittenOffset())
	if f.LogEpoch != nil {
		if e, ok := l.EpochEnd(*f.LogEpoch); ok {
			floor = min(floor, e)
		}
	}
	return floor
}
