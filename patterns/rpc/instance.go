package rpc

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
)

// health is an instance's place in the ejection cycle.
type health int

const (
	healthy  health = iota // gets traffic
	ejected                // gets none until ProbeAfter has passed
	halfOpen               // one probe call at a time; its outcome decides
)

// instance is one discovered server of the service, with the DEALER socket
// connected to it and the goroutines reading that socket. Its mutable
// fields are guarded by the Client's mu.
type instance struct {
	node string
	eps  []string
	sock *socket.Socket
	wg   sync.WaitGroup // recvLoop and eventLoop

	local       string        // the unix socket twin connected to instead of eps; "" for eps
	rtt         time.Duration // gossip's estimate; 0 if unknown
	ewma        time.Duration // smoothed latency of its replies
	ewmaAt      time.Time     // when ewma was last updated; zero: never (no decay)
	outstanding int           // attempts sent and not finished
	fails       int           // consecutive failed attempts
	state       health
	ejectedAt   time.Time
	probing     bool // a half-open probe is out
	draining    bool // it answered StatusUnavailable
	connected   bool // a connection is up
	gone        bool

	st InstanceStats
}

// InstanceStats are a client's counters for one instance.
type InstanceStats struct {
	Node        string    `json:"node"`
	Endpoints   []string  `json:"endpoints,omitempty"` // what the client connects to (an ipc endpoint alone for an instance on this host)
	Outstanding int       `json:"outstanding"`
	State       string    `json:"state"`     // "healthy", "ejected", "half-open"; in ClientStats also "draining" or "gone"
	Calls       uint64    `json:"calls"`     // attempts sent to it
	Errors      uint64    `json:"errors"`    // remote errors it returned
	Failures    uint64    `json:"failures"`  // attempts that failed: timeout, connection lost, refused
	Timeouts    uint64    `json:"timeouts"`  // attempts that timed out, or whose call's deadline passed waiting for them
	Ejections   uint64    `json:"ejections"` // times it was ejected
	Latency     Histogram `json:"latency"`
}

func (h health) String() string {
	switch h {
	case ejected:
		return "ejected"
	case halfOpen:
		return "half-open"
	}
	return "healthy"
}

// watch follows the service's instances until ctx ends or the watch ends.
func (c *Client) watch(ctx context.Context, events <-chan discovery.Event) {
	defer c.wg.Done()
	defer c.dropAll()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				c.mu.Lock()
				c.watchEnded = true
				c.notifyLocked()
				c.mu.Unlock()
				return
			}
			c.apply(ev)
		}
	}
}

// apply brings the instance set in line with one discovery event.
func (c *Client) apply(ev discovery.Event) {
	node := ev.Instance.Node
	c.mu.Lock()
	old := c.insts[node]
	if ev.Type == discovery.Removed {
		if old == nil && ev.Reason == discovery.ReasonFailed {
			// A draining instance that then failed: its calls end now.
			for inst := range c.retiring {
				if inst.node == node {
					old = inst
					delete(c.retiring, inst)
				}
			}
		}
		if old == nil {
			c.mu.Unlock()
			return
		}
		c.log.Info("instance removed", "peer", node, "reason", ev.Reason.String())
		if ev.Reason != discovery.ReasonFailed && old.outstanding > 0 {
			// Withdrawn or left: it is draining and still answers what it
			// accepted. It gets no new calls, and closes when its last
			// attempt ends (or at once if its connection drops).
			delete(c.insts, node)
			old.draining = true
			c.retiring[old] = struct{}{}
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
		c.removeLocked(old)
		if ev.Reason == discovery.ReasonFailed {
			c.failedAt[node] = time.Now()
		}
		c.mu.Unlock()
		old.close()
		return
	}
	eps := ev.Instance.Service.Endpoints
	if old != nil && slices.Equal(old.eps, eps) {
		old.rtt = ev.Instance.RTT
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if old != nil { // endpoints changed: start afresh
		c.mu.Lock()
		c.removeLocked(old)
		c.mu.Unlock()
		old.close()
	}
	inst, err := c.newInstance(node, eps)
	if err != nil {
		c.log.Warn("connect to instance", "peer", node, "err", err)
		return
	}
	inst.rtt = ev.Instance.RTT
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		inst.close()
		return
	}
	if t, ok := c.failedAt[node]; ok {
		// Back after gossip declared it failed: it earns traffic with a probe.
		delete(c.failedAt, node)
		if time.Since(t) < 10*c.cfg.ProbeAfter {
			inst.state, inst.ejectedAt = halfOpen, time.Now()
		}
	}
	c.insts[node] = inst
	c.notifyLocked()
	c.mu.Unlock()
	c.log.Info("instance added", "peer", node, "endpoint", eps)
}

// newInstance makes the DEALER connected to an instance and starts its
// goroutines.
func (c *Client) newInstance(node string, eps []string) (*instance, error) {
	sc := c.cfg.Socket
	if sc.Logger == nil {
		sc.Logger = c.cfg.Logger
	}
	if sc.Linger == 0 {
		sc.Linger = -1 // requests queued for a departed instance are retried elsewhere
	}
	// Each caller waits for its reply: callers write their requests
	// themselves, in batches, rather than wake a writer goroutine.
	sc.SenderWrites = true
	// One connection, to the unix socket twin of the instance's endpoint
	// when it is on this host (see ClientConfig.NoLocalIPC).
	reach := eps
	local, of, ok := c.localFor(eps)
	if ok {
		reach = []string{local}
		if sc.CurveServerKeyFor != nil {
			sc.CurveServerKeyFor = keyForTwin(sc.CurveServerKeyFor, local, of)
		}
	}
	s, err := socket.New(socket.Dealer, sc)
	if err != nil {
		return nil, err
	}
	for _, ep := range reach {
		if err := s.Connect(ep); err != nil {
			s.Close()
			return nil, err
		}
	}
	inst := &instance{node: node, eps: slices.Clone(eps), sock: s, local: local}
	inst.st.Node, inst.st.Endpoints = node, slices.Clone(reach)
	inst.wg.Add(2)
	go c.recvLoop(inst)
	go c.eventLoop(inst)
	return inst, nil
}

// removeLocked takes inst out of the set and fails its attempts.
func (c *Client) removeLocked(inst *instance) {
	if c.insts[inst.node] == inst {
		delete(c.insts, inst.node)
	}
	if !c.closed && !inst.gone {
		st := inst.st
		st.State = "gone"
		now := time.Now()
		c.departed = append(c.departed, departed{InstanceStats: st, at: now})
		c.pruneDepartedLocked(now)
	}
	inst.gone = true
	c.loseLocked(inst)
	c.notifyLocked()
}

// close closes the instance's socket and waits for its goroutines.
func (inst *instance) close() {
	inst.sock.Close()
	inst.wg.Wait()
}

// dropAll removes and closes every instance.
func (c *Client) dropAll() {
	c.mu.Lock()
	all := make([]*instance, 0, len(c.insts)+len(c.retiring))
	for _, inst := range c.insts {
		all = append(all, inst)
		c.removeLocked(inst)
	}
	for inst := range c.retiring {
		all = append(all, inst)
		delete(c.retiring, inst)
		c.removeLocked(inst)
	}
	c.mu.Unlock()
	for _, inst := range all {
		inst.close()
	}
}

// recvLoop hands the instance's replies to their calls.
func (c *Client) recvLoop(inst *instance) {
	defer inst.wg.Done()
	for {
		m, err := inst.sock.Recv(context.Background())
		if errors.Is(err, socket.ErrTimeout) {
			continue // Config.Socket.RecvTimeout: we wait for as long as the socket lives
		}
		if err != nil {
			return // closed
		}
		// A reply is "", header, frames...
		if len(m.Frames) < 2 || len(m.Frames[0]) != 0 {
			c.log.Debug("malformed reply", "peer", inst.node)
			continue
		}
		id, st, err := decodeReply(m.Frames[1])
		if err != nil {
			c.log.Debug("malformed reply", "peer", inst.node, "err", err)
			continue
		}
		// Under pmu, so that a call that has ended (and whose pendingCall
		// went back to the pool) gets nothing.
		c.pmu.Lock()
		if p := c.pending[id]; p != nil {
			select {
			case p.replies <- reply{from: inst, status: st, frames: m.Frames[2:]}:
			default: // the call already has a reply
			}
		}
		c.pmu.Unlock()
	}
}

// eventLoop tracks the instance's connection: a lost connection fails
// the attempts waiting on it at once.
func (c *Client) eventLoop(inst *instance) {
	defer inst.wg.Done()
	for ev := range inst.sock.Events() {
		switch ev.Type {
		case socket.EventConnectRetried, socket.EventHandshakeFailed:
			c.fallBack(inst, ev) // if on a twin
		case socket.EventConnected:
			c.mu.Lock()
			inst.connected = true
			c.mu.Unlock()
		case socket.EventDisconnected:
			c.mu.Lock()
			inst.connected = false
			if !inst.gone {
				c.loseLocked(inst)
			}
			c.mu.Unlock()
		}
	}
}

// errAllTried is pick's answer when every instance was tried already.
var errAllTried = errors.New("rpc: every instance tried")

// pickLocked chooses an instance for an attempt: among those that may get
// traffic and were not tried by this call, two at random, the one with
// fewer outstanding attempts, then the clearly nearer or faster (see
// better). Ejected instances are used only when nothing else is left.
// It counts the attempt as outstanding. A zero now is read when needed.
func (c *Client) pickLocked(tried []*instance, now time.Time) (*instance, error) {
	if len(c.insts) == 0 {
		return nil, ErrNoInstance
	}
	cands := c.cands[:0]
	for _, inst := range c.insts {
		if slices.Contains(tried, inst) || inst.draining {
			continue
		}
		switch inst.state {
		case ejected:
			if now.IsZero() {
				now = time.Now()
			}
			if now.Sub(inst.ejectedAt) >= c.cfg.ProbeAfter {
				inst.state = halfOpen
			} else {
				continue
			}
		}
		if inst.state == halfOpen && inst.probing {
			continue
		}
		cands = append(cands, inst)
	}
	c.cands = cands[:0]
	if len(cands) == 0 {
		// Everything left is ejected, draining or tried: rather than fail,
		// take any untried one, then any at all.
		for _, inst := range c.insts {
			if !slices.Contains(tried, inst) {
				cands = append(cands, inst)
			}
		}
		if len(cands) == 0 {
			return nil, errAllTried
		}
	}
	best := cands[0]
	if len(cands) > 1 {
		i := rand.IntN(len(cands))
		j := rand.IntN(len(cands) - 1)
		if j >= i {
			j++
		}
		a, b := cands[i], cands[j]
		best = a
		if better(b, a, &now, c.cfg.LatencyDecay) {
			best = b
		}
	}
	clear(cands)
	best.outstanding++
	best.st.Calls++
	if best.state == halfOpen {
		best.probing = true
	}
	return best, nil
}

// better reports whether a should get the next call rather than b: the
// connected one, then the one with fewer outstanding attempts, then the
// clearly nearer (gossip RTTs apart by more than rttSlack and a quarter),
// then the clearly faster (latency estimates, see latency, apart by more
// than a quarter). Otherwise they are equals and the random choice
// stands, so that callers making one call at a time (nothing
// outstanding) spread over equal instances instead of all going to the
// one a few microseconds nearer or faster.
func better(a, b *instance, now *time.Time, halfLife time.Duration) bool {
	if a.connected != b.connected {
		return a.connected
	}
	if a.outstanding != b.outstanding {
		return a.outstanding < b.outstanding
	}
	if clearlyLess(a.rtt, b.rtt, rttSlack) {
		return true
	}
	if clearlyLess(b.rtt, a.rtt, rttSlack) {
		return false
	}
	la, lb := a.ewma, b.ewma
	if halfLife > 0 && (clearlyLess(la, lb, 0) || clearlyLess(lb, la, 0)) {
		// The estimates decide: decayed, in case the slower one is stale.
		// (Equal ones need no clock: the random choice stands.)
		if now.IsZero() {
			*now = time.Now()
		}
		la, lb = a.latency(*now, halfLife), b.latency(*now, halfLife)
	}
	return clearlyLess(la, lb, 0)
}

// latency is the instance's latency estimate at now: its smoothed
// latency, halved for every halfLife since its last reply. An instance
// that lost every comparison (slow once, during a warm-up or a pause)
// thus gets a call again after a while, which measures it afresh: no
// healthy instance starves on a stale estimate (the decaying estimate of
// Finagle's and Linkerd's balancers). halfLife ≤ 0 or a zero now: no
// decay.
func (inst *instance) latency(now time.Time, halfLife time.Duration) time.Duration {
	if halfLife <= 0 || now.IsZero() || inst.ewmaAt.IsZero() || inst.ewma == 0 {
		return inst.ewma
	}
	age := now.Sub(inst.ewmaAt)
	if age <= halfLife/16 {
		return inst.ewma // within 5 %: not worth an exponential
	}
	d := time.Duration(float64(inst.ewma) * math.Exp2(-float64(age)/float64(halfLife)))
	return max(d, 1) // known: 0 would mean unknown
}

// rttSlack is the least difference of gossip RTTs that makes one
// instance nearer than another: below it (hosts of one network), RTTs
// are noise.
const rttSlack = time.Millisecond

// clearlyLess reports whether x, known (non-zero), is below y, known, by
// more than slack and a quarter of y.
func clearlyLess(x, y, slack time.Duration) bool {
	return x > 0 && y > 0 && y-x > max(slack, y/4)
}

// outcome is how an attempt ended, for the instance's health.
type outcome int

const (
	outcomeOK        outcome = iota // replied (also with a remote error)
	outcomeFailed                   // timed out or lost its connection
	outcomeRefused                  // overloaded or unavailable: alive but not taking it
	outcomeDraining                 // unavailable: shutting down (refused, and it gets no more calls)
	outcomeTimedOut                 // timed out (failed, and counted as a timeout)
	outcomeAbandoned                // the call ended for another reason (ctx, another reply)
)

// finishLocked ends an attempt on inst and updates its health. A zero now
// is read when needed.
func (c *Client) finishLocked(inst *instance, o outcome, lat time.Duration, now time.Time) {
	inst.outstanding--
	if _, ok := c.retiring[inst]; ok && inst.outstanding == 0 {
		// Its last attempt ended: close it. The watch goroutine is still
		// running (dropAll empties retiring before it ends), so c.wg is
		// above zero here.
		delete(c.retiring, inst)
		c.removeLocked(inst)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			inst.close()
		}()
	}
	wasProbe := inst.state == halfOpen && inst.probing
	if wasProbe {
		inst.probing = false
	}
	switch o {
	case outcomeOK:
		inst.fails = 0
		inst.state = healthy
		inst.st.Latency.observe(lat)
		if c.cfg.LatencyDecay > 0 {
			if now.IsZero() {
				now = time.Now()
			}
			inst.ewma = inst.latency(now, c.cfg.LatencyDecay)
			inst.ewmaAt = now // the reply's arrival (attempt's end)
		}
		if inst.ewma == 0 {
			inst.ewma = lat
		} else {
			inst.ewma += (lat - inst.ewma) / 8
		}
	case outcomeFailed, outcomeTimedOut:
		if o == outcomeTimedOut {
			inst.st.Timeouts++
		}
		inst.fails++
		inst.st.Failures++
		if wasProbe || (inst.state == healthy && inst.fails >= c.cfg.EjectAfter) {
			if now.IsZero() {
				now = time.Now()
			}
			inst.state, inst.ejectedAt = ejected, now
			inst.st.Ejections++
			c.ejections++
			c.log.Warn("instance ejected", "peer", inst.node, "failures", inst.fails)
		}
	case outcomeRefused, outcomeDraining:
		if o == outcomeDraining {
			inst.draining = true
		}
		inst.st.Failures++
	}
}
