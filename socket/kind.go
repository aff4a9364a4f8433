package socket

import (
	"fmt"
	"strings"
)

// Kind is a ZeroMQ socket type.
type Kind int

// Socket kinds. Their String form is the name used on the wire.
const (
	Pair Kind = iota
	Pub
	Sub
	Req
	Rep
	Dealer
	Router
	Pull
	Push
	XPub
	XSub
)

var kindNames = [...]string{"PAIR", "PUB", "SUB", "REQ", "REP", "DEALER", "ROUTER", "PULL", "PUSH", "XPUB", "XSUB"}

// String returns the wire name of k, e.g. "PUSH".
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

func (k Kind) valid() bool { return k >= 0 && int(k) < len(kindNames) }

// ParseKind parses a kind name case-insensitively ("push", "PUSH").
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(n, s) {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown socket kind %q", ErrNotSupported, s)
}

// canRecv reports whether Recv is supported by the kind.
func (k Kind) canRecv() bool { return k != Pub && k != Push }
