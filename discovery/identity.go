package discovery

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/hashicorp/memberlist"
)

// Node identity: a short random string that tells two holders of one node
// name apart (see "Identity and duplicate names" in doc.go).

const (
	identityKey = "~i" // the reserved tag that carries a node's identity
	// identityFile is the name of the file LoadIdentity keeps in a data
	// directory.
	identityFile = "node-id.json"
	// identityVersion is the format version of identityFile.
	identityVersion = 1
	// maxIdentityLen bounds an identity, ours and every peer's.
	maxIdentityLen = 32
)

// ErrNameTaken is returned by New when this node's name is held by a live
// member with another identity: another process (another data directory)
// runs under the same name. It is wrapped by a *NameTakenError.
var ErrNameTaken = errors.New("discovery: node name taken by a live member")

// NameTakenError says which live member holds this node's name.
type NameTakenError struct {
	Name     string // the node name
	Addr     string // gossip address of the member that holds it
	Identity string // that member's identity ("" if it gossips none)
	Self     string // this node's identity
}

// Error names the other member's address and both identities.
func (e *NameTakenError) Error() string {
	return fmt.Sprintf("discovery: node name %q is held by a live member at %s (identity %q; this node is %q): another process runs under this name; pick another name, or stop that one first",
		e.Name, e.Addr, e.Identity, e.Self)
}

// Is makes errors.Is(err, ErrNameTaken) true.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// NewIdentity returns a new random identity: 12 characters of URL-safe
// base64 (72 random bits).
func NewIdentity() string {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("discovery: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LoadIdentity returns the node identity kept in dir (the file
// node-id.json, a small versioned JSON file), creating it with
// NewIdentity on first use. A node that keeps its data in dir passes the
// result as Config.Identity, so that after a restart it is known as the
// same node and takes its name back, while another process under the same
// name is refused.
func LoadIdentity(dir string) (string, error) {
	name := filepath.Join(dir, identityFile)
	var v struct {
		ID string `json:"id"`
	}
	b, err := os.ReadFile(name)
	switch {
	case err == nil:
		if _, err := fsutil.DecodeVersionedJSON(b, identityVersion, &v); err != nil {
			return "", fmt.Errorf("discovery: node identity file %s: %w", name, err)
		}
		if err := checkIdentity(v.ID); err != nil {
			return "", fmt.Errorf("discovery: node identity file %s: %w", name, err)
		}
		return v.ID, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("discovery: read node identity: %w", err)
	}
	v.ID = NewIdentity()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("discovery: create %s: %w", dir, err)
	}
	if err := fsutil.WriteVersionedJSON(name, identityVersion, v, 0o644); err != nil {
		return "", fmt.Errorf("discovery: write node identity: %w", err)
	}
	return v.ID, nil
}

// checkIdentity refuses identities that are empty, too long or hold
// anything but URL-safe base64 characters.
func checkIdentity(id string) error {
	if id == "" || len(id) > maxIdentityLen {
		return fmt.Errorf("identity of %d bytes (1 to %d)", len(id), maxIdentityLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("identity %q holds %q (URL-safe base64 only)", id, r)
		}
	}
	return nil
}

// nameWatch is the part of the alive filter that watches alive messages
// for this node's own name: one from another address with another identity
// is a possible impostor (or this node's previous incarnation, if the
// identity is its own). It is safe for concurrent use.
type nameWatch struct {
	name, identity string

	mu     sync.Mutex
	self   string            // our gossip address once bound; "" before
	claims map[string]string // other addresses claiming our name -> their identity
}

// see records an alive message for n, if it claims our name from another
// address with another identity.
func (w *nameWatch) see(n *memberlist.Node) {
	if n.Name != w.name {
		return
	}
	id := tagsIdentity(n.Meta)
	if id == w.identity {
		return // our own, or our previous incarnation
	}
	addr := net.JoinHostPort(net.IP(n.Addr).String(), fmt.Sprint(n.Port))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.self == "" || addr == w.self {
		return
	}
	if w.claims == nil {
		w.claims = make(map[string]string)
	}
	if len(w.claims) < 16 {
		w.claims[addr] = id
	}
}

// bound tells the watch our own gossip address.
func (w *nameWatch) bound(addr string) {
	w.mu.Lock()
	w.self = addr
	w.mu.Unlock()
}

// take returns and forgets the claims seen so far.
func (w *nameWatch) take() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.claims
	w.claims = nil
	return c
}

// checkName refuses this node's name if a live member with another
// identity holds it: for every other address that claimed the name in
// gossip (seen while joining), it pings that address under our name; a
// member that answers is alive and holds it. A claim that does not answer
// pingTries pings in a row is an incarnation that died and is not refused:
// memberlist hands the name over once it has been dead for
// DeadNodeReclaimTime.
func (m *Membership) checkName() error {
	for addr, id := range m.names.take() {
		udp, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			continue
		}
		// Each Ping waits a probe timeout for its ack.
		for try := 0; try < pingTries; try++ {
			if _, err := m.serf.Memberlist().Ping(m.name, udp); err == nil {
				return &NameTakenError{Name: m.name, Addr: addr, Identity: id, Self: m.set.cfg.Identity}
			}
			if m.isClosed() {
				return ErrClosed
			}
		}
	}
	return nil
}

// pingTries is how many pings in a row a claim of our name must miss to be
// taken for a dead incarnation: 1 s on ProfileLocal, 2.5 s on ProfileLAN
// (a probe timeout each), long enough for a loaded host to answer.
const pingTries = 5

// tagsIdentity returns the identity in a member's encoded tags, or "".
func tagsIdentity(meta []byte) string {
	tags, err := decodeMeta(meta)
	if err != nil {
		return ""
	}
	return tags[identityKey]
}
