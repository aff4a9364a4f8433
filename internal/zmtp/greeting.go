package zmtp

import (
	"bytes"
	"errors"
	"fmt"
)

// GreetingSize is the size in bytes of a ZMTP 3.x greeting.
const GreetingSize = 64

// Protocol version this package speaks.
const (
	VersionMajor = 3
	VersionMinor = 1
)

// Security mechanism names.
const (
	MechanismNull  = "NULL"
	MechanismPlain = "PLAIN"
)

// Errors returned by the decoders. Callers match them with errors.Is; the
// returned errors wrap them with details.
var (
	ErrGreeting      = errors.New("zmtp: malformed greeting")
	ErrVersion       = errors.New("zmtp: unsupported protocol version")
	ErrFrame         = errors.New("zmtp: malformed frame")
	ErrTooLarge      = errors.New("zmtp: message too large")
	ErrCommand       = errors.New("zmtp: malformed command")
	ErrMetadata      = errors.New("zmtp: malformed metadata")
	ErrMechanism     = errors.New("zmtp: security mechanism mismatch")
	ErrSocketType    = errors.New("zmtp: incompatible socket type")
	ErrAuth          = errors.New("zmtp: authentication failed")
	ErrPeerError     = errors.New("zmtp: peer sent ERROR")
	ErrUnexpectedCmd = errors.New("zmtp: unexpected command")
)

// Greeting is the fixed-size preamble each side sends first.
type Greeting struct {
	Major, Minor uint8
	Mechanism    string // at most 20 ASCII bytes, e.g. "NULL" or "PLAIN"
	AsServer     bool
}

// Marshal returns the 64-byte wire form of g.
func (g Greeting) Marshal() [GreetingSize]byte {
	var b [GreetingSize]byte
	b[0] = 0xFF
	b[9] = 0x7F
	b[10] = g.Major
	b[11] = g.Minor
	copy(b[12:32], g.Mechanism)
	if g.AsServer {
		b[32] = 1
	}
	return b
}

// ParseGreeting decodes a 64-byte greeting. It accepts any major version of
// 3 or more (a newer peer downgrades to us) and rejects older ones.
func ParseGreeting(b []byte) (Greeting, error) {
	var g Greeting
	if len(b) != GreetingSize {
		return g, fmt.Errorf("%w: %d bytes, want %d", ErrGreeting, len(b), GreetingSize)
	}
	if b[0] != 0xFF || b[9]&1 != 1 {
		return g, fmt.Errorf("%w: bad signature", ErrGreeting)
	}
	g.Major, g.Minor = b[10], b[11]
	if g.Major < 3 {
		return g, fmt.Errorf("%w: %d.%d", ErrVersion, g.Major, g.Minor)
	}
	mech := b[12:32]
	if i := bytes.IndexByte(mech, 0); i >= 0 {
		if bytes.IndexFunc(mech[i:], func(r rune) bool { return r != 0 }) >= 0 {
			return g, fmt.Errorf("%w: mechanism not zero padded", ErrGreeting)
		}
		mech = mech[:i]
	}
	if len(mech) == 0 {
		return g, fmt.Errorf("%w: empty mechanism", ErrGreeting)
	}
	for _, c := range mech {
		if c < 0x20 || c > 0x7E {
			return g, fmt.Errorf("%w: non-printable mechanism", ErrGreeting)
		}
	}
	g.Mechanism = string(mech)
	switch b[32] {
	case 0:
	case 1:
		g.AsServer = true
	default:
		return g, fmt.Errorf("%w: as-server byte %d", ErrGreeting, b[32])
	}
	return g, nil
}
