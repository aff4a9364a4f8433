// Package zmtp implements the ZeroMQ Message Transport Protocol, versions 3.0
// (RFC 23) and 3.1 (RFC 37), with the NULL, PLAIN (RFC 24) and CURVE
// (RFC 26, to libzmq's byte layout) security mechanisms.
//
// It provides the 64-byte greeting, frame reading and writing over buffered
// streams, command and metadata encoding, the PLAIN HELLO/WELCOME/INITIATE
// exchange, PING/PONG and SUBSCRIBE/CANCEL commands, and a complete
// handshake driver. After a CURVE handshake the Reader and Writer carry
// every frame inside an encrypted MESSAGE, so their users see the same
// frames and commands as with NULL. Keys travel as Z85 text (RFC 32).
// Every decoder checks sizes before allocating and returns an error for
// malformed input; none of them panics on any input. A large frame's
// buffer is allocated as its bytes arrive (64 KiB first, then at most
// doubling), never at the size the peer announces.
//
// The package knows nothing about socket semantics (routing, queues,
// reconnection); those live in package socket.
package zmtp
