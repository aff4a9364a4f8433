package discovery

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// Tag encoding (see doc.go for the specification).
const (
	reservedPrefix = '~'
	serviceKey     = "~s" // followed by the service name
	spoolKey       = "~q"
	curveKeyTag    = "~c" // the node's CURVE public key, 40 Z85 characters
	fieldSep       = "|"
	listSep        = ","
	// MaxTagsSize is the budget for all of a member's tags once encoded the
	// way serf sends them (a magic byte and a msgpack map).
	MaxTagsSize = memberlist.MetaMaxSize
)

// Service is one advertised socket: a name other nodes look up, the socket
// kind they must connect with the matching peer of (e.g. "ROUTER"), and the
// endpoints it is bound to (e.g. "tcp://10.0.0.5:5557").
type Service struct {
	Name      string
	Kind      string
	Endpoints []string
}

// SpoolAd is a node's spool-server advertisement: where to pull from and which
// streams it serves.
type SpoolAd struct {
	Endpoint string
	Streams  []string
	// Partial says the node serves more streams than Streams lists: the
	// whole list did not fit in the gossip tags (MaxTagsSize), so only the
	// first streams, in the order given, are listed. Watchers of an
	// unlisted stream see such a node as a candidate (Instance.Unlisted)
	// and ask its spool server.
	Partial bool
}

// partialMark ends the stream list of a partial spool advertisement. It is
// no valid stream name, and a peer that predates it ignores it as a stream
// nobody asks for.
const partialMark = "*"

// SpoolKind is the Service.Kind reported for spool streams by LookupStream
// and WatchStream.
const SpoolKind = "SPOOL"

func validToken(what, s string, forbidden string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(forbidden, r) {
			return fmt.Errorf("%w: %s %q contains %q", ErrInvalid, what, s, r)
		}
	}
	return nil
}

// CheckServiceName returns an error (wrapping ErrInvalid) unless name can
// be advertised as a service's name: not empty, no spaces, control
// characters, '|' or ','.
func CheckServiceName(name string) error { return validToken("service name", name, "|,") }

func validateService(s Service) error {
	if err := validToken("service name", s.Name, "|,"); err != nil {
		return err
	}
	if err := validToken("socket kind", s.Kind, "|,"); err != nil {
		return err
	}
	if len(s.Endpoints) == 0 {
		return fmt.Errorf("%w: service %q has no endpoints", ErrInvalid, s.Name)
	}
	for _, e := range s.Endpoints {
		if err := validToken("endpoint", e, "|,"); err != nil {
			return err
		}
	}
	return nil
}

func validateSpool(endpoint string, streams []string) error {
	if err := validToken("spool endpoint", endpoint, "|,"); err != nil {
		return err
	}
	for _, st := range streams {
		if err := validToken("stream name", st, "|,*"); err != nil {
			return err
		}
	}
	return nil
}

// compactEndpoint drops the "tcp://" scheme and, when the host is the node's
// own gossip host or a wildcard, the host too: "tcp://10.0.0.5:5557" on node
// 10.0.0.5, and "tcp://0.0.0.0:5557" anywhere, become ":5557".
func compactEndpoint(ep, host string) string {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return ep
	}
	if h, p, err := net.SplitHostPort(rest); err == nil {
		// A wildcard bind (0.0.0.0, ::, *) is reachable at the node's own
		// address: others expand ":port" with the host they gossip with.
		// Without a host of our own there is nothing to expand ":port"
		// with on the other side: keep the endpoint as it is.
		if host != "" && (IsWildcard(h) || h == host) {
			return ":" + p
		}
	}
	return rest
}

// z85Chars is the Z85 alphabet (ZeroMQ RFC 32).
const z85Chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// validCurveKey reports whether s looks like a Z85 CURVE key: 40
// characters of the Z85 alphabet (whether it decodes to a usable key is
// for the socket that uses it to say).
func validCurveKey(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(z85Chars, rune(s[i])) {
			return false
		}
	}
	return true
}

// expandEndpoint reverses compactEndpoint.
func expandEndpoint(ep, host string) string {
	if strings.Contains(ep, "://") {
		return ep
	}
	if strings.HasPrefix(ep, ":") && host != "" {
		return "tcp://" + net.JoinHostPort(host, ep[1:])
	}
	// A wildcard host that reached the tags another way is no address to
	// dial either: it too means the node's own.
	if h, p, err := net.SplitHostPort(ep); err == nil && host != "" && IsWildcard(h) {
		return "tcp://" + net.JoinHostPort(host, p)
	}
	return "tcp://" + ep
}

// IsWildcard reports whether h is a bind-anywhere host: 0.0.0.0, ::, or
// *. Gossip gives an endpoint with such a host the address its node
// gossips from.
func IsWildcard(h string) bool {
	ip := net.ParseIP(h)
	return h == "*" || (ip != nil && ip.IsUnspecified())
}

func encodeService(s Service, host string) (key, value string) {
	var b strings.Builder
	b.WriteString(s.Kind)
	b.WriteString(fieldSep)
	for i, e := range s.Endpoints {
		if i > 0 {
			b.WriteString(listSep)
		}
		b.WriteString(compactEndpoint(e, host))
	}
	return serviceKey + s.Name, b.String()
}

func encodeSpool(ad SpoolAd, host string) string {
	list := ad.Streams
	if ad.Partial {
		list = append(slices.Clip(list), partialMark)
	}
	return compactEndpoint(ad.Endpoint, host) + fieldSep + strings.Join(list, listSep)
}

// fitSpool returns sp, or, when tags with it would not fit in MaxTagsSize,
// a partial copy that lists as many of its streams as fit. It returns sp
// itself when even no stream at all does not fit: the size check then
// reports the error.
func fitSpool(user map[string]string, services map[string]Service, sp *SpoolAd, host string) *SpoolAd {
	if sp == nil || checkTagsSize(buildTags(user, services, sp, host)) == nil {
		return sp
	}
	// The largest prefix of the list that fits, by binary search.
	lo, hi := 0, len(sp.Streams)-1 // lo fits (if anything does), hi+1 does not
	fits := func(n int) bool {
		c := &SpoolAd{Endpoint: sp.Endpoint, Streams: sp.Streams[:n], Partial: true}
		return checkTagsSize(buildTags(user, services, c, host)) == nil
	}
	if !fits(0) {
		return sp
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return &SpoolAd{Endpoint: sp.Endpoint, Streams: slices.Clone(sp.Streams[:lo]), Partial: true}
}

// decodeService parses a service tag value. ok is false for malformed values,
// which are ignored (a newer or broken peer must not break us).
func decodeService(name, value, host string) (Service, bool) {
	kind, eps, ok := strings.Cut(value, fieldSep)
	if !ok || validToken("n", name, "|,") != nil || validToken("k", kind, "|,") != nil || eps == "" {
		return Service{}, false
	}
	s := Service{Name: name, Kind: kind}
	for e := range strings.SplitSeq(eps, listSep) {
		full := expandEndpoint(e, host)
		if validToken("e", e, "|,") != nil || validToken("e", full, "|,") != nil {
			return Service{}, false
		}
		s.Endpoints = append(s.Endpoints, full)
	}
	return s, true
}

// decodeSpool parses the spool tag value.
func decodeSpool(value, host string) (SpoolAd, bool) {
	ep, streams, ok := strings.Cut(value, fieldSep)
	full := expandEndpoint(ep, host)
	if !ok || validToken("e", ep, "|,") != nil || validToken("e", full, "|,") != nil {
		return SpoolAd{}, false
	}
	ad := SpoolAd{Endpoint: full}
	if streams != "" {
		for st := range strings.SplitSeq(streams, listSep) {
			if st == partialMark {
				ad.Partial = true
				continue
			}
			if validToken("s", st, "|,*") != nil {
				return SpoolAd{}, false
			}
			ad.Streams = append(ad.Streams, st)
		}
	}
	return ad, true
}

// advert is the decoded content of a member's tags.
type advert struct {
	user     map[string]string
	services map[string]Service
	spool    *SpoolAd
	identity string // the node's identity; "" if it gossips none
	curveKey string // the node's CURVE public key in Z85; "" if it gossips none
}

func decodeTags(tags map[string]string, host string) advert {
	a := advert{user: map[string]string{}, services: map[string]Service{}}
	for k, v := range tags {
		switch {
		case k == identityKey:
			if checkIdentity(v) == nil {
				a.identity = v
			}
		case k == curveKeyTag:
			if validCurveKey(v) {
				a.curveKey = v
			}
		case k == spoolKey:
			if ad, ok := decodeSpool(v, host); ok {
				a.spool = &ad
			}
		case strings.HasPrefix(k, serviceKey):
			if s, ok := decodeService(k[len(serviceKey):], v, host); ok {
				a.services[s.Name] = s
			}
		case len(k) > 0 && k[0] == reservedPrefix:
			// Unknown reserved key from a newer version: ignore.
		default:
			a.user[k] = v
		}
	}
	return a
}

// buildTags encodes the local advertisement into serf tags.
func buildTags(user map[string]string, services map[string]Service, spool *SpoolAd, host string) map[string]string {
	tags := make(map[string]string, len(user)+len(services)+1)
	for k, v := range user {
		tags[k] = v
	}
	for _, s := range services {
		k, v := encodeService(s, host)
		tags[k] = v
	}
	if spool != nil {
		tags[spoolKey] = encodeSpool(*spool, host)
	}
	return tags
}

// tagsSize is the encoded size serf checks against MaxTagsSize: a magic byte
// followed by the msgpack encoding of the map.
func tagsSize(tags map[string]string) int {
	var buf bytes.Buffer
	buf.WriteByte(0xff)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(tags); err != nil {
		panic("discovery: encoding tags: " + err.Error())
	}
	return buf.Len()
}

func checkTagsSize(tags map[string]string) error {
	if n := tagsSize(tags); n > MaxTagsSize {
		return &TagsTooLargeError{Size: n, Limit: MaxTagsSize}
	}
	return nil
}

func cloneService(s Service) Service {
	s.Endpoints = append([]string(nil), s.Endpoints...)
	return s
}

func sortedServices(m map[string]Service) []Service {
	out := make([]Service, 0, len(m))
	for _, s := range m {
		out = append(out, cloneService(s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
