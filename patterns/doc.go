// Package patterns holds what FastMQ users build from sockets, spools and
// discovery. Each pattern lives in its own sub-package:
//
//   - pull: the core of FastMQ. A spool server on each publisher serves fetch
//     requests over a ROUTER socket; a consumer discovers every publisher of a
//     stream, pulls from each with long polling, delivers in per-publisher
//     order and records its own offsets.
//   - ship: the shipper half of log shipping, following files like tail -F
//     into a spool exactly once across crashes.
//   - collect: the collector half of log shipping, writing each publisher's
//     records to its own file exactly once across restarts.
//   - follow: keeps a socket connected to every discovered instance of a
//     service as instances come and go.
//
// The packages socket, spool and discovery never import patterns.
package patterns
