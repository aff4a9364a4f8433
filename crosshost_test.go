package fastmq_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/netlab"
	"github.com/fastmq/fastmq/socket"
)

// crossHostEnv makes the test binary a node of TestCrossHostDefaults.
const crossHostEnv = "FASTMQ_CROSSHOST_ROLE"

// crossHostRecords is how many records the joining host publishes.
const crossHostRecords = 10

// runCrossHostChild runs one host of TestCrossHostDefaults, inside its
// network namespace. The seed binds its gossip explicitly and consumes; the
// joiner is configured exactly as the README's example (Name, DataDir,
// Seeds on the other host, Key, CurveKeyFile), every address left at its
// default, and publishes. Each makes its own key pair first, and prints
// what the parent checks.
func runCrossHostChild(role string) {
	key, _ := base64.StdEncoding.DecodeString(os.Getenv("FASTMQ_CROSSHOST_KEY"))
	data := os.Getenv("FASTMQ_CROSSHOST_DATA")
	fail := func(err error) {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, secret, err := socket.NewCurveKeypair()
	if err == nil {
		err = socket.WriteCurveKeypair(data+"-node", pub, secret)
	}
	if err != nil {
		fail(err)
	}
	keyFile := data + "-node.key"
	var cfg fastmq.Config
	switch role {
	case "seed":
		cfg = fastmq.Config{Name: "seed", DataDir: data, GossipAddr: os.Getenv("FASTMQ_CROSSHOST_BIND"), Key: key, CurveKeyFile: keyFile}
	case "joiner":
		cfg = fastmq.Config{Name: "web-1", DataDir: data, Seeds: []string{os.Getenv("FASTMQ_CROSSHOST_SEED")}, Key: key, CurveKeyFile: keyFile}
	}
	node, err := fastmq.New(cfg)
	if err != nil {
		fail(err)
	}
	defer node.Close()
	fmt.Println("ADDR", node.GossipAddr(), node.SpoolEndpoint(), node.SpoolOpen())
	switch role {
	case "seed":
		c, err := node.Consume(fastmq.ConsumerConfig{Stream: "access-log", Name: "archive"})
		if err != nil {
			fail(err)
		}
		for i := 0; i < crossHostRecords; i++ {
			m, err := c.Next(ctx)
			if err != nil {
				fail(err)
			}
			fmt.Println("GOT", m.Publisher, m.Offset, string(m.Value))
			c.Ack(m)
		}
		c.Close()
		fmt.Println("DONE")
	case "joiner":
		for i := 0; i < crossHostRecords; i++ {
			if _, err := node.Publish(ctx, "access-log", []byte(fmt.Sprintf("line %d", i))); err != nil {
				fail(err)
			}
		}
		fmt.Println("PUBLISHED")
		// Serve until the parent closes stdin.
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
}

// TestCrossHostDefaults proves the README's example works across two hosts
// (network namespaces joined by a switch): a node given only Seeds on
// another host (and the mesh's Key and its CURVE key) gossips and serves
// its spool on the address that reaches the seed, not on loopback, its
// spool closed to strangers, and a consumer on the other host receives
// every record it published.
func TestCrossHostDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	lab := netlab.New(t, 2)
	keyb := make([]byte, 32)
	rand.Read(keyb)
	key := base64.StdEncoding.EncodeToString(keyb)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := func(i int, role string, env ...string) (lines <-chan string, stop func()) {
		cmd := lab.Command(ctx, i, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crossHostEnv+"="+role, "FASTMQ_CROSSHOST_KEY="+key,
			"FASTMQ_CROSSHOST_DATA="+filepath.Join(dir, role))
		cmd.Env = append(cmd.Env, env...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ch := make(chan string, 100)
		go func() {
			defer close(ch)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				ch <- sc.Text()
			}
		}()
		stop = func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		t.Cleanup(stop)
		return ch, stop
	}
	next := func(ch <-chan string, what string) string {
		t.Helper()
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the process ended", what)
			}
			if strings.HasPrefix(l, "ERR") {
				t.Fatalf("%s: %s", what, l)
			}
			return l
		case <-ctx.Done():
			t.Fatalf("%s: timed out", what)
		}
		return ""
	}
	seedAddr := lab.Addr(0) + ":7946"
	seed, _ := start(0, "seed", "FASTMQ_CROSSHOST_BIND="+seedAddr)
	if l := next(seed, "seed start"); !strings.HasPrefix(l, "ADDR "+seedAddr) {
		t.Fatalf("seed: %s", l)
	}
	joiner, _ := start(1, "joiner", "FASTMQ_CROSSHOST_SEED="+seedAddr)
	l := next(joiner, "joiner start")
	var gossip, spoolEP, open string
	fmt.Sscanf(l, "ADDR %s %s %s", &gossip, &spoolEP, &open)
	if !strings.HasPrefix(gossip, lab.Addr(1)+":") || !strings.HasPrefix(spoolEP, "tcp://"+lab.Addr(1)+":") {
		t.Fatalf("the joiner advertises gossip %q and spool %q, want its own address %s for both", gossip, spoolEP, lab.Addr(1))
	}
	if open != "false" {
		t.Fatalf("the joiner's spool is open to strangers (SpoolOpen %s)", open)
	}
	if l := next(joiner, "joiner publish"); l != "PUBLISHED" {
		t.Fatalf("joiner: %s", l)
	}
	for i := 0; i < crossHostRecords; i++ {
		want := fmt.Sprintf("GOT web-1 %d line %d", i, i)
		if l := next(seed, "seed consume"); l != want {
			t.Fatalf("seed got %q, want %q", l, want)
		}
	}
	if l := next(seed, "seed end"); l != "DONE" {
		t.Fatalf("seed: %s", l)
	}
}

// TestLoopbackGossipWithRemoteSeedRefused checks the other half of the
// cross-host defaults: a node told to gossip on loopback but to join a seed
// on another host fails at once, naming what to set, instead of
// advertising an address its peers cannot reach.
func TestLoopbackGossipWithRemoteSeedRefused(t *testing.T) {
	_, err := fastmq.New(fastmq.Config{Name: "x", DataDir: t.TempDir(), GossipAddr: "127.0.0.1:0", Seeds: []string{"10.77.0.1:7946"}})
	if err == nil || !strings.Contains(err.Error(), "GossipAddr") {
		t.Fatalf("err = %v, want a refusal naming GossipAddr", err)
	}
	_, err = fastmq.New(fastmq.Config{Name: "x", DataDir: t.TempDir(), GossipAddr: "10.77.0.1:0", GossipPlaintext: true,
		SpoolEndpoints: []string{"tcp://127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), "SpoolEndpoints") {
		t.Fatalf("err = %v, want a refusal naming SpoolEndpoints", err)
	}
}
