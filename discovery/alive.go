package discovery

import (
	"bytes"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// maxNodeNameLen bounds a member's name, ours and every peer's.
const maxNodeNameLen = 255

// aliveFilter is memberlist's Alive delegate: it sees every alive message
// (from a datagram, a gossip broadcast or a push/pull state merge) before
// memberlist adds or updates the member, and refuses a member that no
// FastMQ node could have announced. Without it, one datagram on an
// unencrypted gossip port planted a member with no protocol versions, and
// from then on every join failed (the empty-named node's "protocol
// version (0) is incompatible"), because memberlist only checks versions when an alive
// message carries them.
//
// It also shows watch every alive message for this node's own name (see
// checkName).
type aliveFilter struct{ watch *nameWatch }

var _ memberlist.AliveDelegate = aliveFilter{}

// NotifyAlive implements memberlist.AliveDelegate. memberlist has already
// refused a message without the six version bytes before calling it.
func (f aliveFilter) NotifyAlive(n *memberlist.Node) error {
	if err := checkMember(n); err != nil {
		return err
	}
	if f.watch != nil {
		f.watch.see(n)
	}
	return nil
}

// checkMember reports why n cannot be a FastMQ member, or nil.
func checkMember(n *memberlist.Node) error {
	if err := checkNodeName(n.Name); err != nil {
		return err
	}
	if len(n.Addr) != 4 && len(n.Addr) != 16 {
		return fmt.Errorf("address of %d bytes", len(n.Addr))
	}
	if n.Port == 0 {
		return errors.New("port 0")
	}
	if err := checkVersions("protocol", n.PMin, n.PMax, n.PCur, memberlist.ProtocolVersionMin, memberlist.ProtocolVersionMax); err != nil {
		return err
	}
	if err := checkVersions("delegate protocol", n.DMin, n.DMax, n.DCur, serf.ProtocolVersionMin, serf.ProtocolVersionMax); err != nil {
		return err
	}
	return checkMeta(n.Meta)
}

// checkNodeName refuses names that are empty, too long, not UTF-8, or hold
// control or space characters.
func checkNodeName(name string) error {
	switch {
	case name == "":
		return errors.New("empty node name")
	case len(name) > maxNodeNameLen:
		return fmt.Errorf("node name of %d bytes (at most %d)", len(name), maxNodeNameLen)
	case !utf8.ValidString(name):
		return errors.New("node name is not UTF-8")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("node name %q holds a control or space character", name)
		}
	}
	return nil
}

// checkVersions refuses a version range that is empty, zero, or shares no
// version with what this build speaks.
func checkVersions(what string, lo, hi, cur, ourLo, ourHi uint8) error {
	if lo == 0 || hi == 0 || lo > hi || cur < lo || cur > hi {
		return fmt.Errorf("%s versions %d <= %d <= %d are wrong", what, lo, cur, hi)
	}
	if hi < ourLo || lo > ourHi {
		return fmt.Errorf("%s versions %d..%d share none with %d..%d", what, lo, hi, ourLo, ourHi)
	}
	return nil
}

// checkMeta requires serf's tag encoding: a magic byte, then a msgpack map
// of strings, within memberlist's metadata limit.
func checkMeta(meta []byte) error {
	if len(meta) > memberlist.MetaMaxSize {
		return fmt.Errorf("metadata of %d bytes (at most %d)", len(meta), memberlist.MetaMaxSize)
	}
	_, err := decodeMeta(meta)
	return err
}

// decodeMeta decodes serf's tag encoding: a magic byte, then a msgpack map
// of strings.
func decodeMeta(meta []byte) (map[string]string, error) {
	if len(meta) == 0 || meta[0] != 0xff {
		return nil, errors.New("metadata is not serf tags")
	}
	var tags map[string]string
	if err := codec.NewDecoder(bytes.NewReader(meta[1:]), &codec.MsgpackHandle{}).Decode(&tags); err != nil {
		return nil, fmt.Errorf("metadata does not decode: %v", err)
	}
	return tags, nil
}
