package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

// TestDuplicateLiveNameRefused proves a second process cannot take the
// name of a live member (issue 13, item 7): New fails with ErrNameTaken
// naming the holder's address, whether it joins through another member or
// through the holder itself, and the holder keeps its name and identity
// everywhere.
func TestDuplicateLiveNameRefused(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 2, nil)
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 2) })
	holder := nodes[1]
	if err := holder.AdvertiseSpool("tcp://127.0.0.1:5000", []string{"logs"}); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []*Membership{nodes[0], holder} {
		imp, err := New(Config{NodeName: holder.Name(), Profile: ProfileLocal, Logger: testLogger(), Seeds: []string{seed.GossipAddr()}})
		if err == nil {
			imp.Close()
		}
		var taken *NameTakenError
		if !errors.Is(err, ErrNameTaken) || !errors.As(err, &taken) {
			t.Fatalf("impostor joining through %s: got %v, want ErrNameTaken", seed.Name(), err)
		}
		if taken.Addr != holder.GossipAddr() || taken.Identity != holder.Identity() || !strings.Contains(err.Error(), holder.GossipAddr()) {
			t.Fatalf("error %q (%+v) does not name the holder at %s, identity %s", err, taken, holder.GossipAddr(), holder.Identity())
		}
	}
	testutil.WaitFor(t, "holder's spool seen with its identity", waitLong, func() bool {
		got := nodes[0].LookupStream("logs")
		return len(got) == 1 && got[0].Node == holder.Name() && got[0].Addr == holder.GossipAddr() && got[0].Identity == holder.Identity()
	})
	for _, mem := range nodes[0].Members() {
		if mem.Name == holder.Name() && (mem.Status != StatusAlive || mem.Identity != holder.Identity()) {
			t.Fatalf("holder seen as %+v after the impostors", mem)
		}
	}
}

// TestRestartWithSameIdentityTakesNameBack: a node restarted with the same
// identity (the same data directory) on a new port, before the cluster
// noticed its crash, is not refused: it takes its name back once the old
// incarnation is found dead.
func TestRestartWithSameIdentityTakesNameBack(t *testing.T) {
	skipShort(t)
	id := NewIdentity()
	nodes := cluster(t, 2, nil)
	r := newNode(t, "restarted", func(c *Config) { c.Identity = id; c.Seeds = []string{nodes[0].GossipAddr()} })
	testutil.WaitFor(t, "converge", waitLong, func() bool { return aliveCount(nodes[0]) == 3 && aliveCount(r) == 3 })
	r.Close()
	r2 := newNode(t, "restarted", func(c *Config) { c.Identity = id; c.Seeds = []string{nodes[1].GossipAddr()} })
	testutil.WaitFor(t, "restarted node alive everywhere at its new address", waitLong, func() bool {
		for _, n := range nodes {
			found := false
			for _, mem := range n.Members() {
				found = found || mem.Name == "restarted" && mem.Status == StatusAlive && mem.Addr == r2.GossipAddr() && mem.Identity == id
			}
			if !found {
				return false
			}
		}
		return true
	})
}

func TestLoadIdentity(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIdentity(a); err != nil || len(a) != 12 {
		t.Fatalf("identity %q: %v", a, err)
	}
	if again, err := LoadIdentity(dir); err != nil || again != a {
		t.Fatalf("second load: %q, %v; want %q", again, err, a)
	}
	if other, err := LoadIdentity(t.TempDir()); err != nil || other == a {
		t.Fatalf("another directory: %q, %v; want another identity than %q", other, err, a)
	}
	if err := os.WriteFile(filepath.Join(dir, identityFile), []byte(`{"version":1,"data":{"id":"bad id"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(dir); err == nil {
		t.Fatal("a damaged identity file was accepted")
	}
	if _, err := New(Config{NodeName: "n", Profile: ProfileLocal, Identity: "not/base64"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad Config.Identity: got %v, want ErrInvalid", err)
	}
}

// TestDuplicateNameRefusedAfterRetryJoin: with RetryJoin, New cannot
// fail, so an impostor found by the background join stops gossiping,
// closes Stopped and says why through Err.
func TestDuplicateNameRefusedAfterRetryJoin(t *testing.T) {
	skipShort(t)
	nodes := cluster(t, 2, nil)
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 2) })
	imp := newNode(t, nodes[1].Name(), func(c *Config) { c.Seeds = []string{nodes[0].GossipAddr()}; c.RetryJoin = true })
	select {
	case <-imp.Stopped():
	case <-time.After(waitLong):
		t.Fatal("the impostor's Stopped channel did not close")
	}
	if !errors.Is(imp.Err(), ErrNameTaken) {
		t.Fatalf("stopped with %v, want ErrNameTaken", imp.Err())
	}
	if err := imp.Err(); !strings.Contains(err.Error(), nodes[1].GossipAddr()) {
		t.Fatalf("error %q does not name the holder at %s", err, nodes[1].GossipAddr())
	}
	for _, mem := range nodes[0].Members() {
		if mem.Name == nodes[1].Name() && (mem.Addr != nodes[1].GossipAddr() || mem.Status != StatusAlive) {
			t.Fatalf("holder seen as %+v", mem)
		}
	}
}
