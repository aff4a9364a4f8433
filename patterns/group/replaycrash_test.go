package group_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/socket"
	"github.com/fastmq/fastmq/spool"
)

// replayChildEnv makes the test binary run a publisher over the directory
// it names and replay the dead letters of group g there, until it is
// killed (runReplayChild).
const replayChildEnv = "FASTMQ_GROUP_REPLAY_CHILD"

func runReplayChild(dir string) int {
	logs := map[string]*spool.Log{}
	for _, s := range []string{"s", group.DLQStream("s", "g")} {
		l, err := spool.Open(spool.Config{Dir: filepath.Join(dir, "streams", s)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "replay child:", err)
			return 1
		}
		logs[s] = l
	}
	lookup := func(s string) (*spool.Log, bool) { l, ok := logs[s]; return l, ok }
	srv, err := pull.NewServer(pull.ServerConfig{Lookup: lookup})
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay child:", err)
		return 1
	}
	gs, err := group.NewServer(group.ServerConfig{Dir: filepath.Join(dir, "groups"), Lookup: lookup,
		Open: func(s string) (*spool.Log, error) { return logs[s], nil }, Send: srv})
	if err == nil {
		err = group.Register(srv, gs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay child:", err)
		return 1
	}
	fmt.Println("ready")
	res, err := group.Replay(context.Background(), srv.Endpoints()[0], "s", "g", 0, 0, socket.Config{})
	fmt.Println("replayed", res.Replayed, err)
	select {} // until killed
}

// A publisher killed (kill -9) at any moment of a replay leaves it
// exactly once: asked again after the restart, the replay gives the group
// each of its dead letters once in all, and the other group nothing
// (issue 31, item 3).
func TestReplayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	const n = 300
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		dir := t.TempDir()
		p := newPublisher(t, dir)
		p.publish(t, "s", n)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for _, g := range []string{"g", "h"} {
			m := member(t, group.MemberConfig{Name: "m" + g, Group: g, Buffer: 64}, p)
			for range n {
				msg, err := m.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if g == "g" {
					err = msg.Term(ctx, "bad")
				} else {
					err = msg.Ack(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			shutdown(t, m)
		}
		p.close()

		c := exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(), replayChildEnv+"="+dir)
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		if l, err := r.ReadString('\n'); err != nil || l != "ready\n" {
			t.Fatalf("child: %q %v", l, err)
		}
		// Kill it at some moment of its replay: early, in the middle,
		// or after it.
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond * time.Duration(round+1))
		c.Process.Kill()
		c.Wait()

		p = newPublisher(t, dir)
		l, err := p.open("s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.open(group.DLQStream("s", "g")); err != nil {
			t.Fatal(err)
		}
		res, err := group.Replay(ctx, p.srv.Endpoints()[0], "s", "g", 0, 0, socket.Config{})
		if err != nil || res.Replayed+res.Skipped != n {
			t.Fatalf("round %d: replay after the crash: %+v %v", round, res, err)
		}
		m := member(t, group.MemberConfig{Name: "again", Buffer: 64}, p)
		seen := map[uint64]int{}
		for range n {
			msg, err := m.Next(ctx)
			if err != nil {
				t.Fatalf("round %d: %d of %d replayed records: %v", round, len(seen), n, err)
			}
			seen[msg.Offset]++
			if err := msg.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != n {
			t.Fatalf("round %d: %d distinct records, want %d", round, len(seen), n)
		}
		st := p.groups.Stats()["s/g"]
		if st.Floor != n || st.Pending != 0 || l.NextOffset() != n {
			t.Fatalf("round %d: after the replayed records: floor %d pending %d stream %d", round, st.Floor, st.Pending, l.NextOffset())
		}
		if _, err := group.Info(ctx, p.srv.Endpoints()[0], "s", "h", socket.Config{}); err != nil {
			t.Fatal(err)
		}
		if h := p.groups.Stats()["s/h"]; h.Floor != n || h.Pending != 0 {
			t.Fatalf("round %d: the other group: %+v", round, h)
		}
		shutdown(t, m)
		p.close()
		cancel()
		t.Logf("round %d: the replay after the crash replayed %d, skipped %d", round, res.Replayed, res.Skipped)
	}
}
