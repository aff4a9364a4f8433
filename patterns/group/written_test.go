package group_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// TestLeasedOnceWritten: the stream's group commit holds a record's
// fdatasync for seconds. By default the group leases the record as soon
// as it is written: the member has it while its append is still
// unacknowledged and the stream's durable end has not reached it. With
// LeaseAfterSync the member gets it only after the append is
// acknowledged. The group's stats count what it may lease (High).
func TestLeasedOnceWritten(t *testing.T) {
	for _, afterSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("LeaseAfterSync=%v", afterSync), func(t *testing.T) {
			p := newPublisherWith(t, t.TempDir(), func(c *group.ServerConfig) { c.LeaseAfterSync = afterSync })
			// The fdatasync waits up to 3 s for a million records.
			p.spoolCfg = spool.Config{Sync: spool.SyncGroup, GroupInterval: 3 * time.Second, GroupRecords: 1 << 20}
			l, err := p.open("s")
			if err != nil {
				t.Fatal(err)
			}
			m := member(t, group.MemberConfig{Name: "a"}, p)
			a, err := l.AppendAsync(context.Background(), spool.Record{Value: []byte("v")})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			msg, err := m.Next(ctx)
			// High, the end of what the group may lease: the written
			// end, or the durable end with LeaseAfterSync.
			want := uint64(1)
			if afterSync {
				want = 0
			}
			if st, ok := p.groups.Stats()["s/g"]; !ok {
				t.Fatal("no stats for s/g")
			} else if st.High != want {
				t.Fatalf("High %d while the fdatasync waits, want %d", st.High, want)
			}
			if afterSync {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("leased before durable with LeaseAfterSync: %v", err)
				}
				if _, err := a.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if msg, err = m.Next(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err != nil {
					t.Fatalf("not leased while its fdatasync waits: %v", err)
				}
				select {
				case <-a.Done():
					t.Fatal("the append was acknowledged before the record was leased: the test proves nothing")
				default:
				}
				if n := l.NextOffset(); n != 0 {
					t.Fatalf("durable end %d", n)
				}
			}
			if string(msg.Value) != "v" || msg.Offset != 0 {
				t.Fatalf("got %q at %d", msg.Value, msg.Offset)
			}
			if err := msg.Ack(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
