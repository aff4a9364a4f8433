package group

import (
	"slices"
	"sync"
	"sync/atomic"
)

// credit is a member's buffer credit: the Buffer slots that bound the
// records it holds, buffered or asked for in open fetches. A fetch loop
// takes slots before it fetches (one per record asked for), and a slot
// goes back once its record is handed out by Next (or when the fetch
// took fewer records than it asked for).
//
// Beyond those slots each link has one reserve slot of its own (see
// link.fetchLoop): a record fetched with it makes the member owe the
// link its reserve, and the next slot given back repays the debt
// instead of freeing a slot, so that the member holds at most Buffer
// records plus one per link.
//
// Its methods are safe for concurrent use.
type credit struct {
	size int      // Buffer
	free chan int // free slots, given back in counts

	// owed lists the links whose reserve slot a record of the buffer
	// holds (see owe); owing is its length, for give to look without
	// the lock.
	owedMu sync.Mutex
	owed   []*link
	owing  atomic.Int32
}

func newCredit(size int) *credit {
	c := &credit{size: size, free: make(chan int, size)}
	c.free <- size
	return c
}

// half is the most slots one fetch takes: with two fetches open per
// publisher (the protocol's pipeline flag), each holds at most half the slots, so
// that the other can be open too. It is also how many a fetch loop
// gathers before it fetches while records wait in the buffer.
func (c *credit) half() int { return max(1, (c.size+1)/2) }

// batch is how many handed-out records' slots Next gives back at once
// (one channel operation per count, not per record).
func (c *credit) batch() int { return max(1, c.size/8) }

// tryTake takes a free count of slots without waiting; 0 if none.
func (c *credit) tryTake() int {
	select {
	case n := <-c.free:
		return n
	default:
		return 0
	}
}

// give gives n slots back, as one count: to the links owed their
// reserve first, then to the free slots. Counts go to the fetch loops
// waiting for them in turn (a channel hands each to one waiter): with
// several publishers, one whose fetch waits for records there cannot
// keep them all. The channel never fills: it holds at most Buffer
// counts of at least one slot.
func (c *credit) give(n int) {
	if n > 0 && c.owing.Load() > 0 {
		n = c.repay(n)
	}
	if n > 0 {
		c.free <- n
	}
}

// owe notes that a record fetched with ln's reserve slot is about to
// enter the buffer: the next slot given back goes to ln's reserve, not
// to the free slots.
func (c *credit) owe(ln *link) {
	c.owedMu.Lock()
	c.owed = append(c.owed, ln)
	c.owing.Store(int32(len(c.owed)))
	c.owedMu.Unlock()
}

// unowe cancels a debt owe noted for ln, when no record came to hold
// the reserve after all. It reports whether the debt was still owed (if
// not, a slot given back already repaid it).
func (c *credit) unowe(ln *link) bool {
	c.owedMu.Lock()
	defer c.owedMu.Unlock()
	i := slices.Index(c.owed, ln)
	if i < 0 {
		return false
	}
	c.owed = slices.Delete(c.owed, i, i+1)
	c.owing.Store(int32(len(c.owed)))
	return true
}

// repay gives up to n slots back to the links owed their reserve, and
// returns the rest.
func (c *credit) repay(n int) int {
	c.owedMu.Lock()
	defer c.owedMu.Unlock()
	for n > 0 && len(c.owed) > 0 {
		ln := c.owed[0]
		c.owed[0] = nil
		c.owed = c.owed[1:]
		n--
		ln.putReserve()
		select {
		case ln.idle <- struct{}{}: // a loop waiting may take it now
		default:
		}
	}
	c.owing.Store(int32(len(c.owed)))
	return n
}

// hungryChan returns a channel closed once a Next call waits with no
// record buffered (see link.fetchLoop's reserve).
func (m *Member) hungryChan() <-chan struct{} {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if m.hungry == nil {
		m.hungry = make(chan struct{})
	}
	return m.hungry
}

// signalHungry closes the channel of hungryChan, if a fetch loop took it.
func (m *Member) signalHungry() {
	m.qmu.Lock()
	if m.hungry != nil {
		close(m.hungry)
		m.hungry = nil
	}
	m.qmu.Unlock()
}

// starving tells whether a Next call waits with no record buffered
// (none in out: one just taken from it is handed out at once), while the
// member fetches from several publishers. (With one, every slot not
// buffered is in a fetch of that publisher: the reserve could only make
// a second fetch, now and then, as a Next takes a reply's records.)
func (m *Member) starving() bool {
	return m.sleepers.Load() > 0 && len(m.out) == 0 && m.nlinks.Load() > 1
}

// empty reports whether no record waits to be handed out.
func (m *Member) empty() bool { return len(m.out) == 0 && m.queued.Load() == 0 }
