// Package socktool holds the run loops of the fastmq socket tools (push,
// pull, pub, sub, req, rep, router, dealer, pair): stdin lines become
// messages (TAB-separated frames with --multipart), received messages are
// printed one per line, routing ids are shown as text or 0x-hex. The
// fastmq command owns the flags and the socket's configuration.
package socktool
