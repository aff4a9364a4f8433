package socket

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// AuthRequest is what an Authenticator learns about a connecting peer,
// with the meaning of a ZAP request (RFC 27), in process.
type AuthRequest struct {
	// Mechanism is "NULL", "PLAIN" or "CURVE".
	Mechanism string
	// Address is the peer's "host:port" over tcp, the endpoint otherwise.
	Address string
	// Identity is this socket's Config.Identity (ZAP's identity frame).
	Identity []byte
	// Username and Password are a PLAIN client's credentials.
	Username, Password string
	// ClientKey is a CURVE client's long-term public key.
	ClientKey CurveKey
	// Process is the peer process over ipc (as the kernel reports it for
	// the unix socket, SO_PEERCRED) and inproc (this process); nil over
	// tcp, and over ipc where the system does not report it.
	Process *PeerProcess
}

// PeerProcess identifies the process at the other end of an ipc or inproc
// connection: its pid and the uid and gid it ran as when it connected (or
// listened). Local-IPC authorisation can rely on them: the kernel reports
// them, the peer cannot choose them.
type PeerProcess struct {
	PID, UID, GID int
}

// An Authenticator decides whether a peer may connect, as a ZAP handler
// does: nil accepts, an error refuses. It is asked on the server side of
// PLAIN (after Config.PlainAuth accepted the password) and CURVE (after the
// client proved it holds ClientKey's secret key), and on both sides of
// NULL. A refused peer gets an ERROR command saying "authentication
// failed"; the socket reports EventHandshakeFailed with the error.
// Authenticate is called from connection goroutines, possibly
// concurrently, and must not block for long: it runs within
// Config.HandshakeTimeout.
type Authenticator interface {
	Authenticate(AuthRequest) error
}

// AuthFunc adapts a function to an Authenticator.
type AuthFunc func(AuthRequest) error

// Authenticate calls f.
func (f AuthFunc) Authenticate(r AuthRequest) error { return f(r) }

// ErrDenied is wrapped by the refusals of the ready-made authenticators.
var ErrDenied = errors.New("socket: peer denied")

// AllOf returns an Authenticator that accepts a peer only if every one of
// auths does (none: every peer), asking them in order.
func AllOf(auths ...Authenticator) Authenticator {
	return AuthFunc(func(r AuthRequest) error {
		for _, a := range auths {
			if err := a.Authenticate(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// AllowCurveKeys returns an Authenticator that accepts CURVE clients whose
// public key is one of keys, and refuses every other peer.
func AllowCurveKeys(keys ...CurveKey) Authenticator {
	set := make(map[CurveKey]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return AuthFunc(func(r AuthRequest) error {
		if r.Mechanism != zmtp.MechanismCurve {
			return fmt.Errorf("%w: %s peer where a CURVE key is required", ErrDenied, r.Mechanism)
		}
		if !set[r.ClientKey] {
			return fmt.Errorf("%w: client key %s is not allowed", ErrDenied, r.ClientKey.Z85())
		}
		return nil
	})
}

// CurveKeyDir is an Authenticator that accepts CURVE clients whose public
// key is in one of the *.pub files of a directory (one line of 40 Z85
// characters each, as WriteCurveKeypair writes them), in the way of CZMQ's
// certificate store. The directory is read again when its modification
// time changes, so keys can be added and removed while the socket runs.
// It is safe for concurrent use.
type CurveKeyDir struct {
	dir string

	mu    sync.Mutex
	mtime time.Time
	keys  map[CurveKey]bool
}

// NewCurveKeyDir reads the *.pub files of dir. A file that holds no key
// is an error, so that a typo does not silently lock a client out.
func NewCurveKeyDir(dir string) (*CurveKeyDir, error) {
	d := &CurveKeyDir{dir: dir}
	if err := d.reload(); err != nil {
		return nil, err
	}
	return d, nil
}

// Keys returns the number of keys loaded.
func (d *CurveKeyDir) Keys() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys)
}

// reload reads the directory if it changed since the last read; d.mu is
// held or d is not shared yet.
func (d *CurveKeyDir) reload() error {
	st, err := os.Stat(d.dir)
	if err != nil {
		return fmt.Errorf("socket: curve key directory: %w", err)
	}
	if d.keys != nil && st.ModTime().Equal(d.mtime) {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(d.dir, "*.pub"))
	if err != nil {
		return fmt.Errorf("socket: curve key directory: %w", err)
	}
	keys := make(map[CurveKey]bool, len(names))
	for _, n := range names {
		k, err := loadKeyFile(n)
		if err != nil {
			return err
		}
		keys[k] = true
	}
	d.keys, d.mtime = keys, st.ModTime()
	return nil
}

// Authenticate accepts a CURVE client whose key is in the directory.
func (d *CurveKeyDir) Authenticate(r AuthRequest) error {
	if r.Mechanism != zmtp.MechanismCurve {
		return fmt.Errorf("%w: %s peer where a CURVE key is required", ErrDenied, r.Mechanism)
	}
	d.mu.Lock()
	err := d.reload()
	ok := d.keys[r.ClientKey]
	d.mu.Unlock()
	if err != nil && !ok {
		return err // a directory that cannot be read refuses unknown keys
	}
	if !ok {
		return fmt.Errorf("%w: client key %s is not in %s", ErrDenied, r.ClientKey.Z85(), d.dir)
	}
	return nil
}

// PlainPasswords is a PLAIN password list: Check is a Config.PlainAuth,
// and Authenticate an Authenticator that accepts PLAIN clients with a
// listed user and password and refuses every other peer. It is read-only
// and safe for concurrent use.
type PlainPasswords struct {
	users map[string]string
}

// LoadPlainPasswords reads a password file of "user=password" lines, as
// CZMQ's zauth reads them; empty lines and lines starting with '#' are
// skipped. Like a secret key file, it must not be readable by others.
func LoadPlainPasswords(path string) (*PlainPasswords, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("socket: password file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; it must be 0600 or stricter", ErrKeyFileMode, path, st.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("socket: password file: %w", err)
	}
	defer f.Close()
	p := &PlainPasswords{users: make(map[string]string)}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		user, pass, ok := strings.Cut(line, "=")
		if !ok || user == "" || len(user) > 255 || len(pass) > 255 {
			return nil, fmt.Errorf("socket: password file %s line %d: want user=password", path, n)
		}
		p.users[user] = pass
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("socket: password file %s: %w", path, err)
	}
	return p, nil
}

// Check reports whether user and password are listed (Config.PlainAuth).
func (p *PlainPasswords) Check(user, password string) bool {
	want, ok := p.users[user]
	// Compare even for unknown users, so that timing tells nothing.
	eq := subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	return ok && eq
}

// Authenticate accepts PLAIN clients whose credentials Check accepts.
func (p *PlainPasswords) Authenticate(r AuthRequest) error {
	if r.Mechanism != zmtp.MechanismPlain {
		return fmt.Errorf("%w: %s peer where a PLAIN password is required", ErrDenied, r.Mechanism)
	}
	if !p.Check(r.Username, r.Password) {
		return fmt.Errorf("%w: user %q", ErrDenied, r.Username)
	}
	return nil
}

// AllowAddresses returns an Authenticator that accepts only peers whose IP
// address is in one of prefixes ("10.0.0.0/8", "2001:db8::/32", or a
// single address). A peer with no IP address (ipc, inproc) is refused.
func AllowAddresses(prefixes ...string) (Authenticator, error) {
	ps, err := parsePrefixes(prefixes)
	if err != nil {
		return nil, err
	}
	return AuthFunc(func(r AuthRequest) error {
		if ip, ok := peerIP(r.Address); ok && containsIP(ps, ip) {
			return nil
		}
		return fmt.Errorf("%w: address %s is not allowed", ErrDenied, r.Address)
	}), nil
}

// DenyAddresses returns an Authenticator that refuses peers whose IP
// address is in one of prefixes and accepts every other peer.
func DenyAddresses(prefixes ...string) (Authenticator, error) {
	ps, err := parsePrefixes(prefixes)
	if err != nil {
		return nil, err
	}
	return AuthFunc(func(r AuthRequest) error {
		if ip, ok := peerIP(r.Address); ok && containsIP(ps, ip) {
			return fmt.Errorf("%w: address %s is denied", ErrDenied, r.Address)
		}
		return nil
	}), nil
}

func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range ss {
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("socket: address list: %w", err)
			}
			ps = append(ps, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("socket: address list: %w", err)
		}
		ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
	}
	return ps, nil
}

func peerIP(addr string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return a, false
	}
	return a.Unmap(), true
}

func containsIP(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// handshakeFor returns the handshake settings for a connection to or from
// remote; d is the dialer of a connection this socket made (nil for an
// accepted one), which brings the server key CurveServerKeyFor gave.
func (s *Socket) handshakeFor(remote string, d *dialer, proc *PeerProcess) zmtp.Config {
	hs := s.hs
	hs.PeerAddress = remote
	if d != nil && !d.serverKey.IsZero() {
		hs.Curve = &zmtp.CurveConfig{SecretKey: s.cfg.CurveSecretKey, ServerKey: d.serverKey}
	}
	if authz := s.authz; authz != nil {
		hs.Authorize = func(r zmtp.AuthRequest) error { return authz(r, proc) }
	}
	return hs
}

// authorizer returns the handshake's Authorize hook for a normalized
// config, given the peer process where known: nil without an
// Authenticator, except that a CURVE server without one refuses every
// client unless CurveAllowAnyClient.
func (c Config) authorizer() func(zmtp.AuthRequest, *PeerProcess) error {
	a := c.Authenticator
	if a == nil && c.CurveServer && !c.CurveAllowAnyClient {
		return func(r zmtp.AuthRequest, _ *PeerProcess) error {
			if r.Mechanism != zmtp.MechanismCurve {
				return nil
			}
			return fmt.Errorf("%w: a CURVE server without an Authenticator refuses every client (set Authenticator, or CurveAllowAnyClient)", ErrDenied)
		}
	}
	if a == nil {
		return nil
	}
	return func(r zmtp.AuthRequest, proc *PeerProcess) error {
		return a.Authenticate(AuthRequest{
			Mechanism: r.Mechanism,
			Address:   r.Address,
			Identity:  r.Identity,
			Username:  r.Username,
			Password:  r.Password,
			ClientKey: r.ClientKey,
			Process:   proc,
		})
	}
}

// PeerCredentials is what a ROUTER's handshake with one peer established:
// the mechanism, and on the server side the PLAIN user name or the CURVE
// client key the peer proved it holds (and its Authenticator accepted).
type PeerCredentials struct {
	Mechanism string
	Address   string // "host:port" over tcp, the endpoint otherwise
	Username  string
	ClientKey CurveKey
	// Process is the peer process over ipc and inproc (see AuthRequest).
	Process *PeerProcess
}

func credentials(info zmtp.PeerInfo, remote string, proc *PeerProcess) PeerCredentials {
	return PeerCredentials{
		Mechanism: info.Greeting.Mechanism,
		Address:   remote,
		Username:  info.Username,
		ClientKey: info.ClientKey,
		Process:   proc,
	}
}

// PeerCredentials returns the credentials of the ROUTER peer whose
// routing identity is id (the first frame of the messages it sent), so
// that a server can decide per request what the peer may do; false when
// no such peer is connected now (it may have left, and a new peer with
// the same identity taken its place with Config.RouterHandover). It
// returns ErrNotSupported on other kinds of sockets. Safe for concurrent
// use.
func (s *Socket) PeerCredentials(id []byte) (PeerCredentials, bool, error) {
	if s.kind != Router {
		return PeerCredentials{}, false, fmt.Errorf("%w: PeerCredentials on a %s socket", ErrNotSupported, s.kind)
	}
	p := s.router.lookup(id)
	if p == nil {
		return PeerCredentials{}, false, nil
	}
	return p.cred, true, nil
}
