package discovery

import (
	"log/slog"
	"slices"
)

// Advertise adds the service s to this node's advertisement, replacing any
// service of the same name, and gossips it. If the encoded advertisement
// would exceed the tag budget it returns a *TagsTooLargeError (matching
// ErrTagsTooLarge) and nothing changes. It blocks until the update has been
// broadcast or the broadcast timeout (2 s ProfileLocal, 5 s ProfileLAN)
// passed; in the latter case gossip still carries it and a warning is logged.
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
	if err := m.serf.SetTags(tags); err != nil {
		if m.isClosed() {
			return ErrClosed
		}
		// The size was checked above, so serf has taken the new tags and
		// only waiting for the first broadcast failed (timeout); gossip
		// and push/pull will still carry them.
		m.log.Warn("advertisement broadcast not confirmed", slog.Any("err", err))
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
