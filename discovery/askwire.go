package discovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/serf/serf"
)

// The members query (see AskMembers) is a serf query named membersQuery.
// Its payload and each answer's are versioned byte strings:
//
//	request  = version mask exclude after
//	answer   = version flags member*
//	member   = name addr status mflags ntags (key value)*
//
// version is 1 (a node ignores a request of another version, and an asker
// an answer of another version); mask has bit 1<<Status set for each status
// asked for; exclude is a user tag key (members carrying it are left out,
// "" for none) and after a member name (only members sorted after it are
// listed, "" for the first page). flags bit 0 says the responder has more
// members after the answer's last; mflags bit 0 says the member's tags did
// not fit the answer and are left out. Strings are a uvarint length and
// the bytes; status, mask and the flags are one byte; ntags is a uvarint.
// Tags are the member's gossip tags as serf holds them, the reserved
// advertisement keys included (see "Tag encoding" in the package doc), so
// the asker decodes services and the spool as from gossip.
const (
	membersQuery       = "fastmq-members"
	membersWireVersion = 1

	morePages    = 1 << 0 // answer flag: more members follow
	tagsStripped = 1 << 0 // member flag: tags left out

	// queryResponseLimit is serf's QueryResponseSizeLimit, set explicitly
	// in every node's serf config (it is serf's default): the most bytes a
	// node may answer a query with, serf's framing included. Answers stay
	// within one UDP datagram on any network.
	queryResponseLimit = 1024
	// responseFraming is what serf adds around an answer's payload besides
	// the responder's name: a type byte and a msgpack map of LTime, ID,
	// From, Flags and Payload (54 bytes at most), with room to spare.
	responseFraming = 64
)

// errMembersWire is the error of a malformed members request or answer.
var errMembersWire = errors.New("discovery: malformed members query message")

// membersRequest is the payload of a members query.
type membersRequest struct {
	mask    uint8  // 1<<Status for each status asked for
	exclude string // user tag key whose members are left out; "" none
	after   string // list members sorted after this name
}

func (r membersRequest) encode() []byte {
	b := []byte{membersWireVersion, r.mask}
	b = appendString(b, r.exclude)
	return appendString(b, r.after)
}

func decodeMembersRequest(b []byte) (membersRequest, error) {
	var r membersRequest
	if len(b) < 2 || b[0] != membersWireVersion {
		return r, fmt.Errorf("%w: request version or length", errMembersWire)
	}
	r.mask = b[1]
	d := wireReader{b: b[2:]}
	r.exclude = d.string()
	r.after = d.string()
	return r, d.end()
}

// wireMember is one member in an answer.
type wireMember struct {
	name     string
	addr     string
	status   Status
	stripped bool              // tags left out: they did not fit
	tags     map[string]string // serf's tags, reserved keys included
}

func appendWireMember(b []byte, w wireMember) []byte {
	b = appendString(b, w.name)
	b = appendString(b, w.addr)
	var fl byte
	if w.stripped {
		fl |= tagsStripped
	}
	b = append(b, byte(w.status), fl)
	b = binary.AppendUvarint(b, uint64(len(w.tags)))
	for _, k := range slices.Sorted(maps.Keys(w.tags)) {
		b = appendString(b, k)
		b = appendString(b, w.tags[k])
	}
	return b
}

// membersPage is one answer: members sorted by name, and whether more
// follow.
type membersPage struct {
	more    bool
	members []wireMember
}

// answerMembers builds this node's answer to req from mems (serf's member
// list), at most budget bytes: the members req asks for, sorted by name,
// from the first after req.after on, as many as fit. A member whose tags
// do not fit even alone goes without them (marked stripped), so every
// answer makes progress.
func answerMembers(req membersRequest, mems []serf.Member, budget int) []byte {
	mems = slices.DeleteFunc(slices.Clone(mems), func(mem serf.Member) bool {
		st := statusOf(mem.Status)
		_, excluded := mem.Tags[req.exclude]
		return req.mask&(1<<st) == 0 || mem.Name <= req.after || (req.exclude != "" && excluded)
	})
	slices.SortFunc(mems, func(a, b serf.Member) int { return strings.Compare(a.Name, b.Name) })
	out := []byte{membersWireVersion, 0}
	for i, mem := range mems {
		addr := net.JoinHostPort(mem.Addr.String(), strconv.Itoa(int(mem.Port)))
		w := wireMember{name: mem.Name, addr: addr, status: statusOf(mem.Status), tags: mem.Tags}
		e := appendWireMember(nil, w)
		if len(out)+len(e) > budget && i == 0 {
			w.tags, w.stripped = nil, true
			e = appendWireMember(nil, w)
		}
		if len(out)+len(e) > budget {
			out[1] |= morePages
			break
		}
		out = append(out, e...)
	}
	return out
}

func decodeMembersPage(b []byte) (membersPage, error) {
	var p membersPage
	if len(b) < 2 || b[0] != membersWireVersion {
		return p, fmt.Errorf("%w: answer version or length", errMembersWire)
	}
	p.more = b[1]&morePages != 0
	d := wireReader{b: b[2:]}
	for len(d.b) > 0 && d.err == nil {
		w := wireMember{name: d.string(), addr: d.string()}
		st, fl := d.byte(), d.byte()
		w.status, w.stripped = Status(st), fl&tagsStripped != 0
		n := d.uvarint()
		if n > uint64(len(d.b)) { // each tag takes at least two bytes
			return p, fmt.Errorf("%w: %d tags in %d bytes", errMembersWire, n, len(d.b))
		}
		if n > 0 {
			w.tags = make(map[string]string, n)
		}
		for range n {
			k := d.string()
			w.tags[k] = d.string()
		}
		if d.err == nil && (w.name == "" || w.status < StatusAlive || w.status > StatusFailed) {
			return p, fmt.Errorf("%w: member %q with status %d", errMembersWire, w.name, st)
		}
		p.members = append(p.members, w)
	}
	if d.err != nil {
		return membersPage{}, d.err
	}
	return p, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// wireReader reads a members message; the first error sticks.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad length", errMembersWire)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: string of %d bytes in %d", errMembersWire, n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *wireReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = fmt.Errorf("%w: truncated", errMembersWire)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *wireReader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errMembersWire, len(r.b))
	}
	return r.err
}
