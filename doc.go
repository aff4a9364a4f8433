// Package fastmq is a brokerless, peer-to-peer messaging library in the
// ZeroMQ style.
//
// Every process embeds a Node. The node speaks ZeroMQ's socket patterns
// (package socket), finds its peers by gossip (package discovery) and keeps
// what it publishes in a local spool (package spool) from which consumers pull
// with their own recorded offsets (package patterns).
package fastmq
