package discovery

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

func testKey(b byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

func TestWrongKeyCannotJoin(t *testing.T) {
	skipShort(t)
	seed := newNode(t, "enc-seed", func(c *Config) { c.Key = testKey(1) })
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"wrong-key", testKey(2)},
		{"no-key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{NodeName: tc.name, Profile: ProfileLocal, Key: tc.key, Seeds: []string{seed.GossipAddr()},
				JoinTimeout: time.Second, Logger: testLogger()})
			if !errors.Is(err, ErrJoin) || !errors.Is(err, ErrWrongKey) {
				t.Fatalf("err = %v, want ErrJoin and ErrWrongKey", err)
			}
			t.Logf("join error: %v", err)
			if aliveCount(seed) != 1 {
				t.Fatalf("seed sees %d members", aliveCount(seed))
			}
		})
	}
	// An encrypted node cannot join an unencrypted cluster either.
	plain := newNode(t, "plain-seed", nil)
	_, err := New(Config{NodeName: "enc-joiner", Profile: ProfileLocal, Key: testKey(1), Seeds: []string{plain.GossipAddr()},
		JoinTimeout: time.Second, Logger: testLogger()})
	if !errors.Is(err, ErrJoin) || !errors.Is(err, ErrWrongKey) {
		t.Fatalf("encrypted into plain: err = %v, want ErrJoin and ErrWrongKey", err)
	}
	t.Logf("join error: %v", err)
	// The right key joins.
	ok := newNode(t, "right-key", func(c *Config) { c.Key = testKey(1); c.Seeds = []string{seed.GossipAddr()} })
	testutil.WaitFor(t, "join with right key", waitLong, func() bool { return aliveCount(ok) == 2 })
}

func TestKeyRotation(t *testing.T) {
	skipShort(t)
	k1, k2 := testKey(1), testKey(50)
	b1, b2 := base64.StdEncoding.EncodeToString(k1), base64.StdEncoding.EncodeToString(k2)
	nodes := cluster(t, 3, func(c *Config) { c.Key = k1 })
	testutil.WaitFor(t, "converge", waitLong, func() bool { return converged(nodes, 3) })
	ctx := t.Context()
	if err := nodes[0].InstallKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	keys, err := nodes[1].ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if keys[b1] != 3 || keys[b2] != 3 {
		t.Fatalf("after install: %v", keys)
	}
	if err := nodes[0].UseKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].RemoveKey(ctx, k1); err != nil {
		t.Fatal(err)
	}
	keys, err = nodes[2].ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[b2] != 3 {
		t.Fatalf("after rotation: %v", keys)
	}
	// A node with only the new key joins; one with only the old key cannot.
	newer := newNode(t, "newer", func(c *Config) { c.Key = k2; c.Seeds = []string{nodes[1].GossipAddr()} })
	testutil.WaitFor(t, "join with rotated key", waitLong, func() bool { return aliveCount(newer) == 4 })
	_, err = New(Config{NodeName: "older", Profile: ProfileLocal, Key: k1, Seeds: []string{nodes[1].GossipAddr()},
		JoinTimeout: time.Second, Logger: testLogger()})
	if !errors.Is(err, ErrWrongKey) {
		t.Fatalf("old key joined: %v", err)
	}
	// Without encryption key operations are refused.
	plain := newNode(t, "plain", nil)
	if err := plain.InstallKey(ctx, k2); !errors.Is(err, ErrNoEncryption) {
		t.Fatalf("InstallKey without encryption: %v", err)
	}
}
