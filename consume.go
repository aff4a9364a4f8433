package fastmq

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fastmq/fastmq/internal/streams"
	"github.com/fastmq/fastmq/patterns/pull"
	"github.com/fastmq/fastmq/spool"
)

// ErrConsumerExists reports a second live consumer with the same name and
// stream on one node: the two would overwrite each other's offsets.
var ErrConsumerExists = errors.New("fastmq: consumer exists")

// ConsumerConfig configures a consumer made by a Node.
type ConsumerConfig struct {
	// Stream to consume. Required.
	Stream string
	// Name of the consumer. Consumers with the same name on the same node
	// share committed offsets (under DataDir/consumers/Name); each name
	// gets every record of the stream. Required.
	Name string
	// Pull configures the consumer: Start, OnOutOfRange, MaxBytes,
	// MaxWait, CommitInterval, Buffer and the others keep their meaning
	// and defaults from package pull. The node sets Stream and Name from
	// the fields above, Node to its own name, Offsets to the name's offset store, Discovery to
	// its gossip, Socket to the node's Config.Socket (with a fresh
	// identity, and the node's CURVE keys) and Logger to the node's
	// logger: Consume refuses, with an error naming the field, a Pull that
	// sets any of them. An OnClose set here runs before the node's own.
	Pull pull.ConsumerConfig
}

// Consume starts a consumer of stream that pulls from every publisher of it
// in the mesh (this node included) and keeps its offsets under the node's
// data directory. The node closes it on Close; closing it earlier is fine.
func (n *Node) Consume(cfg ConsumerConfig) (*pull.Consumer, error) {
	if !streams.ValidName(cfg.Name) {
		return nil, fmt.Errorf("fastmq: bad consumer name %q", cfg.Name)
	}
	if !streams.ValidName(cfg.Stream) {
		return nil, fmt.Errorf("%w: %q", ErrBadStreamName, cfg.Stream)
	}
	pc := cfg.Pull
	if err := nodeOwned("ConsumerConfig.Pull", owned{"Stream", pc.Stream}, owned{"Name", pc.Name}, owned{"Offsets", pc.Offsets},
		owned{"Discovery", pc.Discovery}, owned{"Socket", pc.Socket}, owned{"Logger", pc.Logger}, owned{"Node", pc.Node}); err != nil {
		return nil, err
	}
	key := consumerKey{cfg.Name, cfg.Stream}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	if n.consumingLocked(key) {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: %q already consumes %q on this node", ErrConsumerExists, cfg.Name, cfg.Stream)
	}
	n.starting[key] = struct{}{} // reserved until the consumer runs or fails
	n.mu.Unlock()
	store, err := n.offsetStore(cfg.Name)
	if err != nil {
		n.mu.Lock()
		delete(n.starting, key)
		n.mu.Unlock()
		return nil, err
	}
	var c *pull.Consumer
	pcfg := cfg.Pull
	pcfg.Stream, pcfg.Name, pcfg.Node = cfg.Stream, cfg.Name, n.cfg.Name
	pcfg.Offsets, pcfg.Discovery, pcfg.Logger = store, n.members, n.cfg.Logger
	pcfg.Socket = n.sec.ClientSocket(n.cfg.Socket)
	pcfg.Socket.Identity = nil // each consumer socket gets its own identity
	pcfg.OnClose = func() {
		if cfg.Pull.OnClose != nil {
			cfg.Pull.OnClose()
		}
		n.mu.Lock()
		delete(n.consumers, c)
		n.mu.Unlock()
	}
	c, err = pull.NewConsumer(pcfg)
	n.mu.Lock()
	delete(n.starting, key)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if n.closed {
		n.mu.Unlock()
		c.Close()
		return nil, ErrClosed
	}
	n.consumers[c] = key
	n.mu.Unlock()
	return c, nil
}

// offsetStore returns the offset store of the consumers called name,
// opening it on first use. The store is opened outside n.mu; openMu makes
// sure only one is opened (it holds a file lock).
func (n *Node) offsetStore(name string) (*spool.OffsetStore, error) {
	n.mu.Lock()
	st := n.offsets[name]
	n.mu.Unlock()
	if st != nil {
		return st, nil
	}
	n.openMu.Lock()
	defer n.openMu.Unlock()
	n.mu.Lock()
	st, closed := n.offsets[name], n.closed
	n.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case st != nil:
		return st, nil
	}
	st, err := spool.OpenOffsets(filepath.Join(n.cfg.DataDir, "consumers", name))
	if err != nil {
		return nil, fmt.Errorf("fastmq: open offsets of consumer %q: %w", name, err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		st.Close()
		return nil, ErrClosed
	}
	n.offsets[name] = st
	n.mu.Unlock()
	return st, nil
}

// consumerKey names a consumer: one live consumer per name and stream.
type consumerKey struct{ name, stream string }

// consumingLocked reports whether a consumer of key runs or is starting.
func (n *Node) consumingLocked(key consumerKey) bool {
	if _, ok := n.starting[key]; ok {
		return true
	}
	for _, k := range n.consumers {
		if k == key {
			return true
		}
	}
	return false
}
