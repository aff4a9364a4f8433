package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/hashicorp/serf/serf"
)

// maxAskPages bounds how many answers AskMembers takes from one responder.
const maxAskPages = 256

// departedMask asks for the members that are leaving, left or failed.
const departedMask = 1<<StatusLeaving | 1<<StatusLeft | 1<<StatusFailed

// MembersQuery says what AskMembers asks for.
type MembersQuery struct {
	// ExcludeTag, when not "", leaves out the members that carry this user
	// tag (with any value): short-lived nodes that tag themselves (say, a
	// command line's observers) would otherwise fill the answers.
	ExcludeTag string
}

// MembersReport is what AskMembers learnt from the members that answered.
// The caller owns its slices.
type MembersReport struct {
	// Departed holds the members that the responders list as leaving,
	// left or failed, sorted by name, with the advertisement they last
	// gossiped; RTT is 0. Where responders disagree on a member's status,
	// the status most of them report wins (ties: the first responder by
	// name).
	Departed []Member
	// Responders are the members that answered, this node included,
	// sorted by name.
	Responders []string
	// Incomplete are the responders whose whole view did not arrive: an
	// answer of a later page did not come before the query timed out, or
	// it had more than maxAskPages pages. Sorted by name.
	Incomplete []string
	// Stripped are the departed members whose tags did not fit an answer:
	// they are listed without tags, services or spool. Sorted by name.
	Stripped []string
}

// Merge returns own (a member list, as Members returns it) with the
// departed members it lacks added, sorted by name: a member own lists, alive
// or not, keeps own's entry, so a member is left or failed when a responder
// says so and own does not have it alive now. own is not modified.
func (r *MembersReport) Merge(own []Member) []Member {
	out := slices.Clone(own)
	for _, d := range r.Departed {
		if !slices.ContainsFunc(own, func(m Member) bool { return m.Name == d.Name }) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AskMembers asks every member, over gossip, for the members it knows to
// be leaving, left or failed: a node that joined recently never learns of
// the members that left or failed before it joined, but the members that
// were there do. Every Membership answers (see "Asking members" in the
// package doc); the first question goes to all, and the responders whose
// view needs more than one answer are asked again for the rest, in rounds.
// AskMembers blocks until every member alive in this node's view has
// answered, or serf's query timeout passed (a member of an older version
// never answers), then for the rounds; it returns ctx's error if ctx ends
// first, ErrClosed after Close.
func (m *Membership) AskMembers(ctx context.Context, q MembersQuery) (*MembersReport, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	want := map[string]bool{}
	for _, mem := range m.serf.Members() {
		if mem.Status == serf.StatusAlive {
			want[mem.Name] = true
		}
	}
	req := membersRequest{mask: departedMask, exclude: q.ExcludeTag}
	first, err := m.askOnce(ctx, req, want)
	if err != nil {
		return nil, err
	}
	views := map[string][]wireMember{}
	for from, p := range first {
		views[from] = p.members
	}
	rep := &MembersReport{}
	if rep.Incomplete, err = m.askRest(ctx, req, first, views); err != nil {
		return nil, err
	}
	rep.Responders = slices.Sorted(maps.Keys(views))
	rep.Departed, rep.Stripped = mergeViews(rep.Responders, views)
	return rep, nil
}

// askRest asks, in rounds, each responder whose answer in first said more
// follow for the rest of its view, and appends the answers to views. It
// returns the responders whose view did not arrive whole, sorted.
func (m *Membership) askRest(ctx context.Context, req membersRequest, first map[string]membersPage, views map[string][]wireMember) ([]string, error) {
	var incomplete []string
	pending := map[string]string{} // responder -> the last member it listed
	next := func(from string, p membersPage) {
		switch {
		case !p.more:
			delete(pending, from)
		case len(p.members) == 0: // makes no progress
			incomplete = append(incomplete, from)
			delete(pending, from)
		default:
			pending[from] = p.members[len(p.members)-1].name
		}
	}
	for from, p := range first {
		next(from, p)
	}
	for page := 1; len(pending) > 0 && page < maxAskPages; page++ {
		got, err := m.askRound(ctx, req, pending)
		if err != nil {
			return nil, err
		}
		for from := range pending {
			p, ok := got[from]
			if !ok {
				incomplete = append(incomplete, from)
				delete(pending, from)
				continue
			}
			views[from] = append(views[from], p.members...)
			next(from, p)
		}
	}
	for from := range pending {
		incomplete = append(incomplete, from)
	}
	slices.Sort(incomplete)
	return incomplete, nil
}

// askRound asks each responder of pending (responder -> the last member
// name it listed) for its next page, all at once, and collects the
// answers.
func (m *Membership) askRound(ctx context.Context, req membersRequest, pending map[string]string) (map[string]membersPage, error) {
	type asked struct {
		node string
		resp *serf.QueryResponse
	}
	var qs []asked
	defer func() {
		for _, a := range qs {
			a.resp.Close()
		}
	}()
	for node, after := range pending {
		r := req
		r.after = after
		resp, err := m.startQuery(r, node)
		if err != nil {
			return nil, err
		}
		qs = append(qs, asked{node, resp})
	}
	out := map[string]membersPage{}
	for _, a := range qs {
		got, err := m.collect(ctx, a.resp, map[string]bool{a.node: true})
		if err != nil {
			return nil, err
		}
		if p, ok := got[a.node]; ok {
			out[a.node] = p
		}
	}
	return out, nil
}

// askOnce asks every member and collects the answers until every member of
// want has answered or the query times out.
func (m *Membership) askOnce(ctx context.Context, req membersRequest, want map[string]bool) (map[string]membersPage, error) {
	resp, err := m.startQuery(req, "")
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	return m.collect(ctx, resp, want)
}

func (m *Membership) startQuery(req membersRequest, node string) (*serf.QueryResponse, error) {
	p := m.serf.DefaultQueryParams()
	if node != "" {
		p.FilterNodes = []string{node}
	}
	resp, err := m.serf.Query(membersQuery, req.encode(), p)
	if err != nil {
		return nil, fmt.Errorf("discovery: ask members: %w", err)
	}
	return resp, nil
}

// collect reads resp's answers until every member of want answered or the
// query timed out. Malformed answers are logged and left out.
func (m *Membership) collect(ctx context.Context, resp *serf.QueryResponse, want map[string]bool) (map[string]membersPage, error) {
	got := map[string]membersPage{}
	missing := len(want)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.closing:
			return nil, ErrClosed
		case r, ok := <-resp.ResponseCh():
			if !ok {
				return got, nil
			}
			p, err := decodeMembersPage(r.Payload)
			if err != nil {
				m.log.Warn("members query answer ignored", slog.String("peer", r.From), slog.Any("err", err))
				continue
			}
			got[r.From] = p
			if want[r.From] {
				missing--
			}
			if missing == 0 {
				return got, nil
			}
		}
	}
}

// mergeViews merges the responders' departed members (see
// MembersReport.Departed) and names those that arrived stripped.
func mergeViews(responders []string, views map[string][]wireMember) (departed []Member, stripped []string) {
	byName := map[string][]wireMember{} // in responder order
	for _, from := range responders {
		for _, w := range views[from] {
			byName[w.name] = append(byName[w.name], w)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		w := pickStatus(byName[name])
		if w.stripped {
			stripped = append(stripped, name)
		}
		departed = append(departed, w.member())
	}
	return departed, stripped
}

// pickStatus returns the entry with the status most entries report (ties:
// the earliest), preferring one with its tags.
func pickStatus(ws []wireMember) wireMember {
	votes := map[Status]int{}
	best := ws[0].status
	for _, w := range ws {
		votes[w.status]++
		if votes[w.status] > votes[best] {
			best = w.status
		}
	}
	var pick *wireMember
	for i := range ws {
		if ws[i].status == best && (pick == nil || pick.stripped && !ws[i].stripped) {
			pick = &ws[i]
		}
	}
	return *pick
}

// member decodes w's tags as gossip's.
func (w wireMember) member() Member {
	host, _, _ := net.SplitHostPort(w.addr)
	adv := decodeTags(w.tags, host)
	var sp *SpoolAd
	if adv.spool != nil {
		c := *adv.spool
		sp = &c
	}
	return Member{
		Name:     w.name,
		Addr:     w.addr,
		Identity: adv.identity,
		CurveKey: adv.curveKey,
		Status:   w.status,
		Tags:     adv.user,
		Services: sortedServices(adv.services),
		Spool:    sp,
	}
}

// answerQuery answers a members query from serf's event channel; other
// queries are not ours to answer.
func (m *Membership) answerQuery(q *serf.Query) {
	if q.Name != membersQuery {
		return
	}
	req, err := decodeMembersRequest(q.Payload)
	if err != nil {
		m.log.Warn("members query ignored", slog.String("peer", q.SourceNode()), slog.Any("err", err))
		return
	}
	budget := queryResponseLimit - responseFraming - len(m.name)
	if err := q.Respond(answerMembers(req, m.serf.Members(), budget)); err != nil {
		m.log.Warn("members query not answered", slog.String("peer", q.SourceNode()), slog.Any("err", err))
	}
}
