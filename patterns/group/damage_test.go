package group_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/group/internal/durable"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// A group's state damaged or gone is never silent nor permanent (issue
// 31, item 9): a zeroed or deleted journal, an empty or flipped state
// file is logged at ERROR and answered status 5 until Repair; a state
// file deleted (journal kept, or both) is logged at ERROR and the group
// waits for an operator's seek instead of delivering again from the
// start what it had acknowledged.
func TestGroupStateDamage(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, groups string)
		status uint8 // the fetch's answer after the damage
		kept   bool  // Repair rebuilds a state from the snapshot
	}{
		{"zeroed journal", func(t *testing.T, groups string) { zeroFile(t, journalOf(t, groups)) }, 5, true},
		{"deleted journal", func(t *testing.T, groups string) { remove(t, journalOf(t, groups)) }, 5, true},
		{"empty state", func(t *testing.T, groups string) { writeFile(t, durable.Path(groups, "s", "g"), nil) }, 5, false},
		{"flipped state", func(t *testing.T, groups string) { flipFirst(t, durable.Path(groups, "s", "g")) }, 5, false},
		{"deleted state", func(t *testing.T, groups string) { remove(t, durable.Path(groups, "s", "g")) }, 6, false},
		{"deleted state and journal", func(t *testing.T, groups string) {
			remove(t, journalOf(t, groups))
			remove(t, durable.Path(groups, "s", "g"))
		}, 6, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			groups := filepath.Join(dir, "groups")
			var logs testutil.LogBuffer
			withLog := func(cfg *group.ServerConfig) { cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }
			p := newPublisherWith(t, dir, withLog)
			p.publish(t, "s", 10)
			m := newAttacker(t, p.srv.Endpoints()[0])
			fetch := func() (uint8, []rawRecord, string) {
				st, n, data := m.call(rawReq{op: 1, maxRecords: 5, ackWaitMs: 30000, maxDeliver: 5, maxAckPending: 100, stream: "s", group: "g", member: "m/1.a"})
				if st != 0 {
					return st, nil, string(data)
				}
				return st, records(t, n, data), ""
			}
			st, recs, _ := fetch()
			if st != 0 || len(recs) != 5 || recs[0].offset != 0 {
				t.Fatalf("first fetch: status %d, %v", st, recs)
			}
			ack := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 0), 5), 1)
			if st, _, data := m.call(rawReq{op: 12, stream: "s", group: "g", member: "m/1.a", body: ack}); st != 0 {
				t.Fatalf("ack: status %d %s", st, data)
			}
			p.close()

			c.damage(t, groups)
			p = newPublisherWith(t, dir, withLog)
			if _, err := p.open("s"); err != nil {
				t.Fatal(err)
			}
			m = newAttacker(t, p.srv.Endpoints()[0])
			for range 3 { // answered so every time, logged once
				if st, recs, msg := fetch(); st != c.status {
					t.Fatalf("fetch after the damage: status %d %v %q, want %d", st, recs, msg, c.status)
				}
			}
			if n := strings.Count(logs.String(), "level=ERROR msg=\"group state"); n != 1 {
				t.Fatalf("%d ERROR lines about the group's state, want 1:\n%s", n, logs.String())
			}
			if c.status == 5 {
				p.close()
				rep, err := group.Repair(groups, "s", "g")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Damage == "" || len(rep.Quarantined) == 0 || rep.Kept != c.kept || rep.Lost == "" {
					t.Fatalf("repair: %+v", rep)
				}
				for _, q := range rep.Quarantined {
					if _, err := os.Stat(q); err != nil {
						t.Fatalf("quarantined file: %v", err)
					}
				}
				p = newPublisherWith(t, dir, withLog)
				if _, err := p.open("s"); err != nil {
					t.Fatal(err)
				}
				m = newAttacker(t, p.srv.Endpoints()[0])
				st, recs, msg := fetch()
				if c.kept {
					// The snapshot held the group at 0; the journal's acks
					// are lost, as the report says: they come again.
					if st != 0 || len(recs) == 0 {
						t.Fatalf("fetch after the repair: status %d %q", st, msg)
					}
					return
				}
				if st != 6 {
					t.Fatalf("fetch after the repair of a lost snapshot: status %d %v, want 6 (waits for a seek)", st, recs)
				}
			}
			// The operator's seek starts it again where the operator says.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := group.Seek(ctx, p.srv.Endpoints()[0], "s", "g", spool.Start{Kind: spool.StartOffset, Offset: 5}, socket.Config{}); err != nil {
				t.Fatal(err)
			}
			if st, recs, msg := fetch(); st != 0 || len(recs) != 5 || recs[0].offset != 5 {
				t.Fatalf("fetch after the seek: status %d %v %q, want offsets 5..9", st, recs, msg)
			}
		})
	}
}

// journalOf returns the path of the group s/g's one journal.
func journalOf(t *testing.T, groups string) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(groups, "s", "g.*.journal"))
	if len(ms) != 1 {
		t.Fatalf("journals %v", ms)
	}
	return ms[0]
}

func zeroFile(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, make([]byte, fi.Size()))
}

func flipFirst(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	writeFile(t, p, b)
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// A group whose state was written before the server kept groups.known is
// noted there once loaded: its state vanishing later is not silent either.
func TestGroupKnownFromOlderState(t *testing.T) {
	dir := t.TempDir()
	p := newPublisher(t, dir)
	p.publish(t, "s", 3)
	m := newAttacker(t, p.srv.Endpoints()[0])
	if st, _, _ := m.call(rawReq{op: 1, maxRecords: 1, ackWaitMs: 30000, maxDeliver: 5, stream: "s", group: "g", member: "m/1.a"}); st != 0 {
		t.Fatalf("fetch: status %d", st)
	}
	p.close()
	remove(t, filepath.Join(dir, "groups", "groups.known"))
	p = newPublisher(t, dir)
	if _, err := p.open("s"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := group.Info(ctx, p.srv.Endpoints()[0], "s", "g", socket.Config{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the group noted in groups.known", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "groups", "groups.known"))
		return strings.Contains(string(b), `"s/g"`)
	})
}
