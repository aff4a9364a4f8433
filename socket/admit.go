package socket

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Admission of accepted connections (all under s.mu). A connection that
// has not finished its handshake holds buffers and a goroutine, so the
// socket bounds how many there are and keeps them moving:
//
//   - the 64-byte greeting must arrive within greetingTimeout (or
//     HandshakeTimeout if shorter); the rest of the handshake then has
//     until HandshakeTimeout after the accept;
//   - at most maxPendingPerSource handshakes per TCP source address and
//     maxPendingHandshakes in all may be in progress; a new connection
//     over either bound evicts a handshake of its source or of all, so a
//     flood of silent connections cannot lock good peers out. The victim
//     is one that has not sent its greeting (a good peer sends it at
//     once) if there is one, from the source with the most handshakes in
//     progress, and the oldest of those: an attacker's new connections
//     evict its own old ones, not another address's;
//   - Config.MaxConns bounds accepted connections, handshaking or not,
//     and Config.MaxConnsPerSource those of one TCP source address: a
//     new one evicts the oldest handshake (of that address), or is
//     refused if none is left;
//   - a TCP source address whose PLAIN credentials failed
//     maxAuthFailures times within authWindow is refused until the
//     window ends.

// Admission limits.
const (
	// maxPendingHandshakes bounds the accepted connections in their
	// handshake at once.
	maxPendingHandshakes = 256
	// maxPendingPerSource bounds them per TCP source address.
	maxPendingPerSource = 32
	// greetingTimeout is how long an accepted connection may take to send
	// its greeting.
	greetingTimeout = time.Second
	// maxAuthFailures PLAIN failures per source address within
	// authWindow lock the address out for the rest of the window.
	maxAuthFailures = 10
	authWindow      = time.Minute
	// maxAuthSources bounds the source addresses whose failures are
	// remembered.
	maxAuthSources = 4096
)

// ErrRefused is the reason, in EventHandshakeFailed, that an accepted
// connection was closed by admission control rather than for what it
// sent: too many handshakes or connections, a handshake evicted for a
// newer one, or a source address locked out after repeated PLAIN
// failures. Match it with errors.Is.
var ErrRefused = fmt.Errorf("socket: connection refused")

var (
	errTooManyHandshakes = fmt.Errorf("%w: more than %d handshakes in progress", ErrRefused, maxPendingHandshakes)
	errEvicted           = fmt.Errorf("%w: handshake evicted for a newer connection", ErrRefused)
	errTooManyConns      = fmt.Errorf("%w: Config.MaxConns or MaxConnsPerSource connections reached", ErrRefused)
	errAuthLocked        = fmt.Errorf("%w: too many failed PLAIN handshakes from this address", ErrRefused)
)

// pendingConn is a connection in its handshake.
type pendingConn struct {
	c        net.Conn
	src      string // TCP source address ("" for ipc and inproc)
	accepted bool
	since    time.Time
	evicted  bool        // closed by admission control
	greeted  atomic.Bool // the peer's greeting arrived
}

// authFails counts a source address's PLAIN failures in its window.
type authFails struct {
	n     int
	reset time.Time // when the window ends
}

// sourceOf returns the TCP source address of c, or "" for other
// transports (which per-source limits do not apply to).
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// admitLocked decides whether an accepted connection from src may start
// its handshake, evicting older handshakes to make room; it returns the
// reason for refusing it.
func (s *Socket) admitLocked(src string, now time.Time) error {
	if src != "" {
		if f := s.authFails[src]; f != nil && f.n >= maxAuthFailures && now.Before(f.reset) {
			return errAuthLocked
		}
	}
	if m := s.cfg.MaxConns; m > 0 && s.accepted >= m {
		if !s.evictOldestLocked("") {
			return errTooManyConns
		}
	}
	if m := s.cfg.MaxConnsPerSource; m > 0 && src != "" && s.connsBySrc[src] >= m {
		if !s.evictOldestLocked(src) {
			return errTooManyConns
		}
	}
	if src != "" && s.pendingBySrc[src] >= maxPendingPerSource {
		s.evictOldestLocked(src)
	}
	if s.pendingAccepted >= maxPendingHandshakes {
		s.evictOldestLocked("")
	}
	if s.pendingAccepted >= maxPendingHandshakes {
		return errTooManyHandshakes // cannot happen: kept for safety
	}
	return nil
}

// evictOldestLocked closes an accepted connection still in its handshake
// (from src, unless src is "") and reports whether there was one. It
// picks, in this order, one whose greeting has not arrived, one from the
// source with the most handshakes in progress, and the oldest.
func (s *Socket) evictOldestLocked(src string) bool {
	var old *pendingConn
	var oldGreeted bool
	for _, pc := range s.pending {
		if !pc.accepted || (src != "" && pc.src != src) {
			continue
		}
		g := pc.greeted.Load()
		if old != nil {
			if g != oldGreeted {
				if g {
					continue
				}
			} else if a, b := s.pendingBySrc[pc.src], s.pendingBySrc[old.src]; a != b {
				if a < b {
					continue
				}
			} else if !pc.since.Before(old.since) {
				continue
			}
		}
		old, oldGreeted = pc, g
	}
	if old == nil {
		return false
	}
	old.evicted = true
	s.removePendingLocked(old)
	old.c.Close()
	return true
}

// addPendingLocked records a connection starting its handshake.
func (s *Socket) addPendingLocked(pc *pendingConn) {
	s.pending[pc.c] = pc
	if pc.accepted {
		s.pendingAccepted++
		s.accepted++
		if pc.src != "" {
			s.pendingBySrc[pc.src]++
			s.connsBySrc[pc.src]++
		}
	}
}

// removePendingLocked records that pc's handshake ended (once, however
// often it is called). The connection still counts for MaxConns until
// connDoneLocked.
func (s *Socket) removePendingLocked(pc *pendingConn) {
	if s.pending[pc.c] != pc {
		return
	}
	delete(s.pending, pc.c)
	if pc.accepted {
		s.pendingAccepted--
		if pc.src != "" {
			if s.pendingBySrc[pc.src]--; s.pendingBySrc[pc.src] <= 0 {
				delete(s.pendingBySrc, pc.src)
			}
		}
	}
}

// connDone records that an accepted connection from src ended.
func (s *Socket) connDone(src string) {
	s.mu.Lock()
	s.accepted--
	if src != "" {
		if s.connsBySrc[src]--; s.connsBySrc[src] <= 0 {
			delete(s.connsBySrc, src)
		}
	}
	s.mu.Unlock()
}

// authFailed counts a failed PLAIN handshake from src.
func (s *Socket) authFailed(src string, now time.Time) {
	if src == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.authFails[src]
	if f == nil {
		if len(s.authFails) >= maxAuthSources {
			for k, g := range s.authFails {
				if !now.Before(g.reset) {
					delete(s.authFails, k)
				}
			}
			if len(s.authFails) >= maxAuthSources {
				return
			}
		}
		f = &authFails{}
		s.authFails[src] = f
	}
	if !now.Before(f.reset) {
		f.n, f.reset = 0, now.Add(authWindow)
	}
	f.n++
}
