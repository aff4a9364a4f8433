package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/socket"
)

// mixedMeshGrace is how long a publisher the node cannot connect to
// securely (fastmq.ErrMixedMesh) may stay so before a command gives up:
// gossip may not have told its key yet.
const mixedMeshGrace = 3 * time.Second

// refusals watches, for a command that reads a stream, the refusals that
// never pass by themselves: gossip that the seeds cannot decrypt (a wrong
// --key), and publishers of the stream this node cannot connect to
// securely (a CURVE mesh without --curve-key, or the reverse). It ends
// the command's context with the refusal, which err then returns; while
// a refusal may still pass, it says on the log that it retries.
type refusals struct {
	mu  sync.Mutex
	err error
}

// watch starts the watch until ctx ends; stop ends the command. The
// goroutines it starts end with ctx.
func (r *refusals) watch(ctx context.Context, n *fastmq.Node, stream string, seeds []string, stop context.CancelFunc) {
	fail := func(err error) { r.fail(err, stop) }
	if len(seeds) > 0 {
		go func() {
			// The node's own join retries in the background, for ever;
			// this one says at once when the seeds cannot decrypt our
			// gossip (the two sides do not share a key).
			_, err := n.Membership().Join(ctx, seeds...)
			if errors.Is(err, discovery.ErrWrongKey) {
				fail(fmt.Errorf("cannot join the mesh (check --key, or --plaintext-gossip on both sides): %w", err))
			}
		}()
	}
	keyFor := n.ClientSocketConfig(socket.Config{}).CurveServerKeyFor
	if keyFor == nil || stream == "" {
		return
	}
	log := n.Logger()
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		since := map[string]time.Time{} // publisher -> first refusal seen
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, in := range n.Membership().LookupStream(stream) {
				if len(in.Service.Endpoints) == 0 || in.Node == n.Name() {
					continue
				}
				_, err := keyFor(in.Service.Endpoints[0])
				if !errors.Is(err, fastmq.ErrMixedMesh) {
					delete(since, in.Node)
					continue
				}
				first, seen := since[in.Node]
				if !seen {
					since[in.Node] = time.Now()
					log.Warn("cannot connect to publisher securely yet, retrying", slog.String("peer", in.Node), slog.Any("err", err))
					continue
				}
				if time.Since(first) >= mixedMeshGrace {
					fail(fmt.Errorf("publisher %s of %q: %w", in.Node, stream, err))
					return
				}
			}
		}
	}()
}

// fail records err as the refusal that ends the command (the first one
// wins) and calls stop.
func (r *refusals) fail(err error, stop context.CancelFunc) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	stop()
}

// Err returns the refusal that ended the command, or nil.
func (r *refusals) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
