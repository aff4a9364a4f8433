package discovery

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/serf/serf"
)

// Advertise adds the service s to this node's advertisement, replacing any
// service of the same name, and gossips it. If the encoded advertisement
// would exceed the tag budget it returns a *TagsTooLargeError (matching
// ErrTagsTooLarge) and nothing changes. It blocks until the update has been
// broadcast or the broadcast timeout (2 s ProfileLocal, 5 s ProfileLAN)
// passed; in the latter case gossip still carries it and a warning is logged.
//
// memberlist drops a tag change that races a refutation (this node answering
// an accusation of having failed, as a node restarted on a new port does
// while the cluster still suspects its old incarnation). Advertise checks
// that memberlist gossips the new advertisement and gives it again if not,
// up to 20 times, each dropped try costing a broadcast timeout when the node
// has peers; if every try is dropped it returns an error wrapping
// ErrNotGossiped and the previous advertisement stays. Withdraw and
// AdvertiseSpool do the same.
func (m *Membership) Advertise(s Service) error {
	if err := validateService(s); err != nil {
		return err
	}
	s = cloneService(s)
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if old, ok := svcs[s.Name]; ok && old.Kind == s.Kind && slices.Equal(old.Endpoints, s.Endpoints) {
			return false
		}
		svcs[s.Name] = s
		return true
	})
}

// Withdraw removes the named service from this node's advertisement.
// Withdrawing a name that is not advertised is a no-op. Watchers see a
// Removed event with ReasonWithdrawn.
func (m *Membership) Withdraw(name string) error {
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if _, ok := svcs[name]; !ok {
			return false
		}
		delete(svcs, name)
		return true
	})
}

// AdvertiseSpool replaces this node's spool advertisement: the endpoint its
// spool server listens on and the streams it serves. An empty endpoint
// withdraws the spool advertisement. Size errors are as for Advertise.
func (m *Membership) AdvertiseSpool(endpoint string, streams []string) error {
	var ad *SpoolAd
	if endpoint != "" {
		if err := validateSpool(endpoint, streams); err != nil {
			return err
		}
		ad = &SpoolAd{Endpoint: endpoint, Streams: slices.Clone(streams)}
	}
	return m.updateAd(func(svcs map[string]Service, sp **SpoolAd) bool {
		if ad == nil && *sp == nil {
			return false
		}
		if ad != nil && *sp != nil && (*sp).Endpoint == ad.Endpoint && slices.Equal((*sp).Streams, ad.Streams) {
			return false
		}
		*sp = ad
		return true
	})
}

// updateAd applies change to a copy of the local advertisement, checks its
// size, gossips it and only then commits it locally.
func (m *Membership) updateAd(change func(map[string]Service, **SpoolAd) bool) error {
	m.tagMu.Lock()
	defer m.tagMu.Unlock()
	if m.isClosed() {
		return ErrClosed
	}
	svcs := make(map[string]Service, len(m.services)+1)
	for k, v := range m.services {
		svcs[k] = v
	}
	sp := m.spoolWant
	if !change(svcs, &sp) {
		return nil
	}
	want := sp
	sp = fitSpool(m.base, svcs, want, m.host)
	tags := buildTags(m.base, svcs, sp, m.host)
	if err := checkTagsSize(tags); err != nil {
		return err
	}
	if err := m.setTags(tags); err != nil {
		return err
	}
	if sp != want && (m.spool == nil || !m.spool.Partial || len(m.spool.Streams) != len(sp.Streams)) {
		m.log.Warn("spool advertisement truncated to fit gossip tags", slog.Int("listed", len(sp.Streams)), slog.Int("streams", len(want.Streams)))
	}
	m.services, m.spool, m.spoolWant = svcs, sp, want
	adv := advert{user: cloneMap(m.user), services: make(map[string]Service, len(svcs)), spool: want, identity: m.set.cfg.Identity, curveKey: m.set.cfg.CurveKey} // this node knows its whole list
	for k, v := range svcs {
		adv.services[k] = v
	}
	m.mu.Lock()
	m.self = adv
	if nv := m.view[m.name]; nv != nil {
		m.setNodeLocked(m.name, &nodeView{addr: nv.addr, status: nv.status, adv: adv}, ReasonWithdrawn)
	}
	m.mu.Unlock()
	return nil
}

// tagTries is how many times setTags gives serf the tags before it gives
// up. A try that memberlist drops waits out serf's broadcast timeout when
// the node has peers; tries race refutations only while accusations come,
// and the pause between them lets those pass.
const (
	tagTries = 20
	tagPause = time.Millisecond
)

// setTags makes tags this node's gossiped tags (m.tagMu held). It checks
// that memberlist took them, and gives them again if not: memberlist's
// UpdateNode draws the update's incarnation before it takes its lock, and a
// refutation that runs in between (this node accused of failing, as a node
// restarted on a new port is while the cluster still suspects its old
// incarnation) takes a higher incarnation with the old tags. memberlist
// then drops the update without a word and waits out the broadcast
// timeout; the node would gossip its old tags (without the stream it just
// opened, say) until its next change.
func (m *Membership) setTags(tags map[string]string) error {
	for try := 1; ; try++ {
		// memberlist drops every update once Leave began: no try would
		// be taken.
		if m.isClosed() || m.serf.State() != serf.SerfAlive {
			return ErrClosed
		}
		err := m.serf.SetTags(tags)
		if m.isClosed() {
			return ErrClosed
		}
		if m.tagsTaken(tags) {
			if err != nil {
				// The size was checked, and memberlist took the tags:
				// only waiting for the first broadcast failed (timeout);
				// gossip and push/pull will still carry them.
				m.log.Warn("advertisement broadcast not confirmed", slog.Any("err", err))
			}
			return nil
		}
		if try == tagTries {
			// serf keeps the new tags in its configuration (its queries
			// filter on them) while memberlist gossips the old ones.
			if err != nil {
				return fmt.Errorf("%w in %d tries (the last: %v)", ErrNotGossiped, tagTries, err)
			}
			return fmt.Errorf("%w in %d tries: memberlist dropped every one (as it does while this node refutes accusations of having failed)", ErrNotGossiped, tagTries)
		}
		m.tagRetries.Add(1)
		m.log.Warn("gossip dropped an advertisement update (a refutation raced it): giving it again", slog.Int("try", try))
		time.Sleep(tagPause)
	}
}

// tagsTaken reports whether memberlist gossips tags for this node.
// LocalNode points into memberlist's live state; reading its Meta is safe
// because only UpdateNode writes the local node's meta (refutations change
// its incarnation alone), and m.tagMu serializes the calls to it.
func (m *Membership) tagsTaken(tags map[string]string) bool {
	got, err := decodeMeta(m.serf.Memberlist().LocalNode().Meta)
	return err == nil && maps.Equal(got, tags)
}
