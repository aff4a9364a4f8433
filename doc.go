// Package fastmq is a brokerless, peer-to-peer messaging library in the
// ZeroMQ style.
//
// Every process embeds a Node. The node speaks ZeroMQ's socket patterns
// (package socket), finds its peers by gossip (package discovery) and keeps
// what it publishes in a local spool (package spool) from which consumers pull
// with their own recorded offsets (package patterns).
//
// The Node is a facade over those packages, and each of its parts can be
// used without it: Consume makes a pull.Consumer (patterns/pull) keeping its
// offsets under the node's data directory, Dial a socket that a
// follow.Follower (patterns/follow) keeps connected to a service's
// instances, Group a group.Member whose publishers' group.Server the node
// runs, and the node's spools are served by a pull.Server. The node only
// wires: its disk guard, CURVE trust and address defaults live in internal
// packages, groups far behind are watched by group.BehindWatch, and its
// HTTP side beyond Status (the web console, Prometheus metrics) sits on
// the floor above, served by the fastmq command. A program that wants the
// garbage collector tuned for a small heap calls heaproom.Keep in main.
package fastmq
