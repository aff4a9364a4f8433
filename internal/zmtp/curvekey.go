package zmtp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
	"golang.org/x/crypto/nacl/secretbox"
)

// KeySize is the size in bytes of a CURVE (Curve25519) key.
const KeySize = 32

// KeyTextSize is the length of a key in Z85 text.
const KeyTextSize = 40

// Key is a CURVE public or secret key. Its zero value is "no key".
type Key [KeySize]byte

// ErrKey reports a malformed or unusable CURVE key.
var ErrKey = errors.New("zmtp: invalid curve key")

// ParseKey decodes a key from its 40-character Z85 text.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != KeyTextSize {
		return k, fmt.Errorf("%w: %d characters, want %d of Z85", ErrKey, len(s), KeyTextSize)
	}
	b, err := Z85Decode(s)
	if err != nil {
		return k, fmt.Errorf("%w: %w", ErrKey, err)
	}
	copy(k[:], b)
	return k, nil
}

// Z85 returns the key's 40-character Z85 text, as zmq_curve_keypair
// prints it.
func (k Key) Z85() string {
	s, _ := Z85Encode(k[:]) // 32 is a multiple of 4
	return s
}

// IsZero reports whether k is the zero value.
func (k Key) IsZero() bool { return k == Key{} }

// PublicKey returns the public key of the secret key sec.
func PublicKey(sec Key) Key {
	var pub Key
	p, err := curve25519.X25519(sec[:], curve25519.Basepoint)
	if err != nil { // cannot happen with the base point
		panic(err)
	}
	copy(pub[:], p)
	return pub
}

// GenerateKeypair returns a new random key pair, reading randomness from
// rnd (nil: crypto/rand).
func GenerateKeypair(rnd io.Reader) (pub, sec Key, err error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	if _, err := io.ReadFull(rnd, sec[:]); err != nil {
		return Key{}, Key{}, fmt.Errorf("zmtp: generate curve key: %w", err)
	}
	return PublicKey(sec), sec, nil
}

// precompute returns the shared key of crypto_box_beforenm for a peer's
// public key and our secret key. A public key of low order, which would
// give a predictable shared secret, is refused.
func precompute(peerPub, sec *Key) (*[32]byte, error) {
	// X25519 refuses a low-order point (the shared secret would be all
	// zeros); box.Precompute would not.
	if _, err := curve25519.X25519(sec[:], peerPub[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	var k [32]byte
	box.Precompute(&k, (*[32]byte)(peerPub), (*[32]byte)(sec))
	return &k, nil
}

// cookieKeys is the server's rotating secret for WELCOME cookies: a
// cookie made with the current or the previous key opens, so a cookie is
// good for at least cookieKeyLife. The server keeps nothing else about a
// client between HELLO and INITIATE: its short-term secret key travels in
// the cookie.
type cookieKeys struct {
	mu      sync.Mutex
	cur     [32]byte
	prev    [32]byte
	hasPrev bool
	born    time.Time
}

// cookieKeyLife is how long a cookie key is used to make cookies.
const cookieKeyLife = time.Minute

var serverCookies cookieKeys

// keys returns the current and previous cookie keys, rotating first if the
// current one is older than cookieKeyLife.
func (c *cookieKeys) keys() (cur, prev [32]byte, hasPrev bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.born.IsZero() || now.Sub(c.born) >= cookieKeyLife {
		var k [32]byte
		if _, err := io.ReadFull(rand.Reader, k[:]); err != nil {
			return cur, prev, false, fmt.Errorf("zmtp: cookie key: %w", err)
		}
		if !c.born.IsZero() && now.Sub(c.born) < 2*cookieKeyLife {
			c.prev, c.hasPrev = c.cur, true
		} else {
			c.hasPrev = false
		}
		c.cur, c.born = k, now
	}
	return c.cur, c.prev, c.hasPrev, nil
}

// sealCookie returns a cookie (16-byte nonce and 80-byte box) holding the
// client's short-term public key and our short-term secret key.
func (c *cookieKeys) sealCookie(clientPub, ourSec *Key) ([]byte, error) {
	key, _, _, err := c.keys()
	if err != nil {
		return nil, err
	}
	var nonce [24]byte
	copy(nonce[:], "COOKIE--")
	if _, err := io.ReadFull(rand.Reader, nonce[8:]); err != nil {
		return nil, fmt.Errorf("zmtp: cookie nonce: %w", err)
	}
	var plain [64]byte
	copy(plain[:32], clientPub[:])
	copy(plain[32:], ourSec[:])
	out := make([]byte, 16, 16+80)
	copy(out, nonce[8:])
	out = secretbox.Seal(out, plain[:], &nonce, &key)
	clear(plain[:])
	return out, nil
}

// openCookie opens a cookie made by sealCookie with the current or the
// previous key.
func (c *cookieKeys) openCookie(cookie []byte) (clientPub, ourSec Key, err error) {
	if len(cookie) != 96 {
		return clientPub, ourSec, fmt.Errorf("%w: cookie of %d bytes", ErrCurve, len(cookie))
	}
	cur, prev, hasPrev, err := c.keys()
	if err != nil {
		return clientPub, ourSec, err
	}
	var nonce [24]byte
	copy(nonce[:], "COOKIE--")
	copy(nonce[8:], cookie[:16])
	var buf [64]byte
	plain, ok := secretbox.Open(buf[:0], cookie[16:], &nonce, &cur)
	if !ok && hasPrev {
		plain, ok = secretbox.Open(buf[:0], cookie[16:], &nonce, &prev)
	}
	if !ok {
		return clientPub, ourSec, fmt.Errorf("%w: cookie does not open (expired or forged)", ErrCurve)
	}
	copy(clientPub[:], plain[:32])
	copy(ourSec[:], plain[32:64])
	clear(buf[:])
	return clientPub, ourSec, nil
}
