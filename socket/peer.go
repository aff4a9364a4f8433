package socket

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// peer is one established connection. Its reader runs in the goroutine
// that owns the connection (serveConn); its writer in a second goroutine.
type peer struct {
	s        *Socket
	conn     net.Conn
	endpoint string
	remote   string
	id       string // ROUTER routing identity
	minor    uint8  // peer's ZMTP minor version
	r        *zmtp.Reader
	w        *zmtp.Writer // held by wmu's holder once the handshake is done
	cw       *connWriter  // what w writes to
	// wmu is held by whoever writes to w: the writer goroutine, or a
	// sender writing directly (direct.go).
	wmu    sync.Mutex
	direct bool            // REQ, REP: senders may write directly (direct.go)
	inproc bool            // conn is an inproc pipe
	cred   PeerCredentials // what the handshake authenticated

	// senderWrites: Config.SenderWrites applies (direct.go).
	// writesReplies: the reader goroutine writes what is sent while it
	// lets the receivers it woke run (ROUTER over tcp or ipc: a server's
	// replies). sbatch is the batch either takes messages into (wmu's
	// holder only).
	senderWrites  bool
	writesReplies bool
	sbatch        []Msg

	// lingerDL is the read deadline Close's linger set (Unix ns; 0 = none).
	// alive restores it if it overwrote it, so a peer cannot keep Close
	// waiting.
	lingerDL atomic.Int64

	outq    *outQueue
	written int64 // wmu's holder: bytes of the last batch, for outq.take
	inq     *inQueue
	ctrl    chan zmtp.Command
	subctl  subCtl // SUB/XSUB: subscription changes to announce

	quit     chan struct{}
	quitOnce sync.Once
	errMu    sync.Mutex
	err      error

	subs     subTable      // PUB/XPUB: what this peer subscribed to (changed by the reader)
	subBytes int64         // what subs counts against maxPeerSubBytes (reader only)
	lastDrop atomic.Int64  // unix nanos of the last EventDropped
	drops    atomic.Uint64 // messages this peer missed

	peerTTL   time.Duration // from the peer's PINGs (reader only)
	lastAlive time.Time     // last read deadline extension (reader only)

	// Reader only: decoded messages not yet in inq with their sizes
	// (msgBytes) and total, the room inq had when last seen, and blocks
	// to carve frame slices and (ROUTER) identity frames from.
	batch       []Msg
	sizes       []int64
	batchBytes  int64
	inRoom      int
	inRoomBytes int64
	fbuf        [][]byte
	idbuf       []byte // ROUTER: a block to carve identity frames from

	// The reader role (recvdirect.go): who may read r. The fields above
	// marked reader only belong to the role's holder, as do clean and rd.
	lends      bool          // Recv callers may take the role
	role       atomic.Int32  // roleReader, roleFree or roleCaller
	lendReq    atomic.Bool   // a Recv asked for the role
	lastFree   atomic.Int64  // clock() when the role was last left free
	roleBack   chan struct{} // capacity 1: the reader goroutine may take the role back
	roleFreed  chan struct{} // capacity 1: the role was left free while watch was set
	watch      atomic.Bool   // the reader goroutine waits for roleFreed, not for its timer
	ks         kickState
	rd         *connReader
	clean      bool        // nothing of the next message is buffered in r
	lentUnused bool        // the last lend ended with no Recv taking the role (reader goroutine only)
	lendTimer  *time.Timer // reader goroutine only
}

// maxBatch bounds the messages the reader decodes before handing them to
// the receive queue.
const maxBatch = 256

func (p *peer) shutdown(err error) {
	p.quitOnce.Do(func() {
		p.errMu.Lock()
		p.err = err
		p.errMu.Unlock()
		close(p.quit)
		p.conn.Close()
	})
}

func (p *peer) cause() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

// serveConn handshakes on c and, if that succeeds, runs the peer until the
// connection ends. It reports whether the handshake succeeded.
func (s *Socket) serveConn(c net.Conn, ep string, dialed bool, d *dialer) bool {
	remote := ep // unix and inproc peers have no useful address
	if a := c.RemoteAddr(); a != nil && a.Network() == "tcp" {
		remote = a.String()
	}
	now := time.Now()
	pc := &pendingConn{c: c, accepted: !dialed, since: now}
	if !dialed {
		pc.src = sourceOf(c)
	}
	if !s.admitConn(pc, ep, remote, now) {
		return false
	}
	if !dialed {
		defer s.connDone(pc.src)
	}
	p := s.newPeer(c, ep, remote)
	info, err := p.handshake(pc, d, now)
	if err != nil {
		c.Close()
		if s.closed.Load() || (d != nil && d.ctx.Err() != nil) {
			return false
		}
		s.st.hsFail.Add(1)
		s.log.Warn("handshake failed", "endpoint", ep, "peer", remote, "err", err)
		s.emit(Event{Type: EventHandshakeFailed, Endpoint: ep, Peer: remote, Err: err})
		return false
	}
	typ := EventAccepted
	if dialed {
		typ = EventConnected
	}
	s.log.Debug("peer connected", "endpoint", ep, "peer", remote, "type", info.SocketType)
	s.emit(Event{Type: typ, Endpoint: ep, Peer: remote})
	s.rr.blocked.wake()
	p.run()
	return true
}

// admitConn lists a connection as pending its handshake. An accepted one
// must first pass admission control: connections that never finish their
// handshake each hold buffers, so admission bounds them (admit.go). It
// reports false, with c closed, when the socket is closed or the
// connection is refused; an admitted accepted connection is released
// with connDone.
func (s *Socket) admitConn(pc *pendingConn, ep, remote string, now time.Time) bool {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		pc.c.Close()
		return false
	}
	if pc.accepted {
		if err := s.admitLocked(pc.src, now); err != nil {
			s.mu.Unlock()
			pc.c.Close()
			s.st.hsFail.Add(1)
			s.emit(Event{Type: EventHandshakeFailed, Endpoint: ep, Peer: remote, Err: err})
			return false
		}
	}
	s.addPendingLocked(pc)
	s.mu.Unlock()
	return true
}

// newPeer makes the peer of a connection, before its handshake.
func (s *Socket) newPeer(c net.Conn, ep, remote string) *peer {
	cw := newConnWriter(c)
	rd := &connReader{conn: c}
	p := &peer{
		s:           s,
		conn:        c,
		endpoint:    ep,
		remote:      remote,
		r:           zmtp.NewReader(rd, 0),
		rd:          rd,
		roleBack:    make(chan struct{}, 1),
		roleFreed:   make(chan struct{}, 1),
		w:           zmtp.NewWriter(cw, 0),
		cw:          cw,
		direct:      (s.kind == Req || s.kind == Rep) && cw.try != nil,
		inproc:      isMemConn(c),
		lends:       directRecvKind(s.kind) && !isMemConn(c),
		outq:        newOutQueue(s.cfg.SendHWM, s.cfg.SendHWMBytes, &s.queuedBytes, s.cfg.SendHWMBytesTotal),
		inq:         newInQueue(s.cfg.RecvHWM, s.cfg.RecvHWMBytes, &s.in.queued),
		inRoom:      s.cfg.RecvHWM,
		inRoomBytes: s.cfg.RecvHWMBytes,
		ctrl:        make(chan zmtp.Command, 16),
		quit:        make(chan struct{}),
	}
	rd.p = p
	p.senderWrites = s.cfg.SenderWrites && cw.try != nil
	p.writesReplies = s.kind == Router && cw.try != nil && !p.inproc
	p.r.MaxMsgSize = s.cfg.MaxMsgSize
	switch m := s.cfg.MaxMsgSize; {
	case m < 0:
		p.r.MaxCmdSize = 1 << 40 // allocated only as data arrives
	case m > 64<<10:
		p.r.MaxCmdSize = m
	}
	if m := s.cfg.MaxMsgFrames; m > 0 {
		p.r.MaxFrames = m
	}
	return p
}

// handshake runs the ZMTP handshake of a pending connection, within the
// socket's handshake timeout, and on success adds the peer to the socket.
func (p *peer) handshake(pc *pendingConn, d *dialer, now time.Time) (zmtp.PeerInfo, error) {
	s, c := p.s, p.conn
	proc := peerProcess(c)
	hs := s.handshakeFor(p.remote, d, proc)
	if pc.accepted && pc.src != "" {
		// A refused credential counts against its source before the
		// peer hears the ERROR, so its next try already sees the count.
		if auth := hs.Auth; auth != nil {
			hs.Auth = func(user, pass string) bool {
				ok := auth(user, pass)
				if !ok {
					s.authFailed(pc.src, time.Now())
				}
				return ok
			}
		}
		if authz := hs.Authorize; authz != nil {
			hs.Authorize = func(r zmtp.AuthRequest) error {
				err := authz(r)
				if err != nil {
					s.authFailed(pc.src, time.Now())
				}
				return err
			}
		}
	}
	hsEnd := now.Add(s.cfg.HandshakeTimeout)
	if pc.accepted && s.cfg.HandshakeTimeout > greetingTimeout {
		// The greeting is due soon; the rest may take longer.
		_ = c.SetDeadline(now.Add(greetingTimeout))
		hs.OnGreeting = func() {
			pc.greeted.Store(true)
			_ = c.SetDeadline(hsEnd)
		}
	} else {
		_ = c.SetDeadline(hsEnd)
	}
	info, err := zmtp.Handshake(p.r, p.w, hs)
	s.mu.Lock()
	s.removePendingLocked(pc)
	if pc.evicted && err != nil {
		err = fmt.Errorf("%w (%w)", errEvicted, err)
	}
	s.mu.Unlock()
	if err != nil {
		return info, err
	}
	_ = c.SetDeadline(time.Time{})
	p.minor = info.Greeting.Minor
	if info.Greeting.Major > 3 {
		p.minor = 1
	}
	p.id = string(info.Identity)
	p.clean = p.r.Buffered() == 0
	p.cred = credentials(info, p.remote, proc)
	if s.kind == Router {
		if err := s.router.checkIdentity(p); err != nil {
			return info, err
		}
	}
	return info, s.addPeer(p)
}

// run serves a connected peer until its connection ends: a writer
// goroutine and, on the calling goroutine, the reader.
func (p *peer) run() {
	s := p.s
	writerDone := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(writerDone)
		p.writeLoop()
	}()
	rerr := p.readLoop()
	p.shutdown(rerr)
	<-writerDone
	s.removePeer(p)
	err := p.cause()
	if errors.Is(err, zmtp.ErrTooLarge) {
		s.st.tooLarge.Add(1)
		err = fmt.Errorf("%w: %w", ErrMsgTooLarge, err)
	}
	if !s.closed.Load() {
		s.st.disconnects.Add(1)
		s.log.Debug("peer disconnected", "endpoint", p.endpoint, "peer", p.remote, "err", err)
		s.emit(Event{Type: EventDisconnected, Endpoint: p.endpoint, Peer: p.remote, Err: err})
	}
}
