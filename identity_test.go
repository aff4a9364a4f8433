package fastmq_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/internal/testutil"
)

// TestDuplicateNodeNameRefused: a second process with a live node's name
// (another data directory) does not start (issue 13, item 7), while the
// same node restarted with its data directory, on a new gossip port, does,
// with the same identity.
func TestDuplicateNodeNameRefused(t *testing.T) {
	seed := newNode(t, "seed")
	dir := filepath.Join(t.TempDir(), "p")
	p, err := fastmq.New(fastmq.Config{Name: "p", DataDir: dir, Seeds: []string{seed.GossipAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "s", 10)

	imp, err := fastmq.New(fastmq.Config{Name: "p", DataDir: filepath.Join(t.TempDir(), "impostor"), Seeds: []string{seed.GossipAddr()}})
	if err == nil {
		imp.Close()
		t.Fatal("a second node named p started while p lives")
	}
	if !errors.Is(err, discovery.ErrNameTaken) || !strings.Contains(err.Error(), p.GossipAddr()) {
		t.Fatalf("got %v, want ErrNameTaken naming %s", err, p.GossipAddr())
	}

	id, addr := p.Identity(), p.GossipAddr()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p2, err := fastmq.New(fastmq.Config{Name: "p", DataDir: dir, Seeds: []string{seed.GossipAddr()}})
	if err != nil {
		t.Fatalf("restart with the same data directory: %v", err)
	}
	defer p2.Close()
	if p2.Identity() != id || p2.GossipAddr() == addr {
		t.Fatalf("restarted as %s at %s; want identity %s on a new port (was %s)", p2.Identity(), p2.GossipAddr(), id, addr)
	}
	testutil.WaitFor(t, "restarted p alive at its new address", 30*time.Second, func() bool {
		for _, m := range seed.Membership().Members() {
			if m.Name == "p" {
				return m.Status == discovery.StatusAlive && m.Addr == p2.GossipAddr() && m.Identity == id
			}
		}
		return false
	})
}
