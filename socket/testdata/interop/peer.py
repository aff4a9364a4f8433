#!/usr/bin/env python3
"""libzmq peer for the FastMQ interop suite (pyzmq).

Usage: peer.py ROLE ENDPOINT bind|connect [options]

The peer prints "ENDPOINT <resolved endpoint>" as its first stdout line once
the socket is bound or connected, then one line per received message (frames
joined by TAB), then "DONE" and exits 0 (with --hold: once stdin ends, so the
caller can inspect the link before it goes away). Errors go to stderr with exit 1.
Every run is bounded by an overall alarm (--alarm seconds, default 20).

Roles:
  push     send --count messages "msg-<i>"
  pull     receive --count messages, print them
  pub      XPUB: wait for the first subscription, then send --count messages
           per topic (--topics, comma separated, default A,B): "<topic>-<i>"
  sub      subscribe to each --subscribe prefix (none: everything), print
           --count messages
  req      send --count requests "req-<i>", print each reply
  rep      echo --count requests unchanged, print them
  dealer   send --count messages "dealer-<i>" (with an empty delimiter frame
           first when --envelope), print --count replies
  router   receive --count messages, print them (identity first) and echo
           each back to its sender
  pair     with --echo: echo --count messages; otherwise send --count
           messages "pair-<i>" and print --count replies
  authfail connect a REQ with PLAIN credentials, wait for the handshake to be
           rejected, print "AUTH_FAILED"
"""

import argparse
import binascii
import signal
import sys
import time

import zmq
from zmq.utils.monitor import recv_monitor_message


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


LENS = False


def fmt(frames):
    if LENS:
        return "\t".join("len=%d byte=%d" % (len(f), f[0] if f else -1)
                         for f in frames)
    return "\t".join(f.decode("utf-8", "backslashreplace") for f in frames)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role")
    ap.add_argument("endpoint")
    ap.add_argument("mode", choices=["bind", "connect"])
    ap.add_argument("--count", type=int, default=3)
    ap.add_argument("--alarm", type=int, default=20)
    ap.add_argument("--timeout-ms", type=int, default=10000,
                    help="per send/recv timeout")
    ap.add_argument("--subscribe", action="append", default=[])
    ap.add_argument("--topics", default="A,B")
    ap.add_argument("--envelope", action="store_true")
    ap.add_argument("--echo", action="store_true")
    ap.add_argument("--identity", default="")
    ap.add_argument("--plain-user", default="")
    ap.add_argument("--plain-pass", default="")
    ap.add_argument("--plain-server", default="",
                    help="user:password accepted by a PLAIN server (ZAP)")
    ap.add_argument("--heartbeat-ivl", type=int, default=0, help="ms")
    ap.add_argument("--heartbeat-timeout", type=int, default=0, help="ms")
    ap.add_argument("--heartbeat-ttl", type=int, default=0, help="ms")
    ap.add_argument("--gap-ms", type=int, default=0,
                    help="idle time between messages a sender sends")
    ap.add_argument("--quiet-ms", type=int, default=0,
                    help="after the last message, keep receiving this long "
                         "and print anything more as EXTRA lines")
    ap.add_argument("--sizes", default="",
                    help="push: send one message per comma-separated size "
                         "instead of msg-<i>; each frame is the byte "
                         "size%%251 repeated")
    ap.add_argument("--lens", action="store_true",
                    help="print len=<n> byte=<first byte> per frame instead "
                         "of the frame")
    ap.add_argument("--hold", action="store_true",
                    help="after DONE, keep the socket open until stdin ends")
    ap.add_argument("--monitor", action="store_true",
                    help="print DISCONNECTS <n> before DONE")
    a = ap.parse_args()
    global LENS
    LENS = a.lens

    signal.alarm(a.alarm)

    ctx = zmq.Context()
    auth = None
    kinds = {
        "push": zmq.PUSH, "pull": zmq.PULL, "pub": zmq.XPUB, "sub": zmq.SUB,
        "req": zmq.REQ, "rep": zmq.REP, "dealer": zmq.DEALER,
        "router": zmq.ROUTER, "pair": zmq.PAIR, "authfail": zmq.REQ,
    }
    if a.role not in kinds:
        sys.exit("peer.py: unknown role " + a.role)
    s = ctx.socket(kinds[a.role])
    s.linger = 2000
    s.rcvtimeo = a.timeout_ms
    s.sndtimeo = a.timeout_ms
    if a.identity:
        s.identity = a.identity.encode()
    if a.heartbeat_ivl:
        s.setsockopt(zmq.HEARTBEAT_IVL, a.heartbeat_ivl)
    if a.heartbeat_timeout:
        s.setsockopt(zmq.HEARTBEAT_TIMEOUT, a.heartbeat_timeout)
    if a.heartbeat_ttl:
        s.setsockopt(zmq.HEARTBEAT_TTL, a.heartbeat_ttl)
    if a.plain_user or a.plain_pass:
        s.plain_username = a.plain_user.encode()
        s.plain_password = a.plain_pass.encode()
    if a.plain_server:
        from zmq.auth.thread import ThreadAuthenticator
        user, _, pw = a.plain_server.partition(":")
        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_plain(domain="*", passwords={user: pw})
        s.plain_server = True
    mon = None
    if a.monitor or a.role == "authfail":
        mon = s.get_monitor_socket()
    if a.role == "sub":
        for p in a.subscribe or [""]:
            s.setsockopt(zmq.SUBSCRIBE, p.encode())

    if a.mode == "bind":
        s.bind(a.endpoint)
        out("ENDPOINT " + s.getsockopt(zmq.LAST_ENDPOINT).decode())
    else:
        s.connect(a.endpoint)
        out("ENDPOINT " + a.endpoint)

    def gap():
        if a.gap_ms:
            time.sleep(a.gap_ms / 1000.0)

    n = a.count
    r = a.role
    if r == "push" and a.sizes:
        for size in [int(x) for x in a.sizes.split(",")]:
            s.send(bytes([size % 251]) * size)
    elif r == "push":
        for i in range(n):
            gap()
            s.send(b"msg-%d" % i)
    elif r == "pull" or r == "sub":
        for i in range(n):
            out(fmt(s.recv_multipart()))
    elif r == "pub":
        ev = s.recv()  # first subscription message: \x01 + prefix
        if not ev or ev[0] != 1:
            sys.exit("peer.py: unexpected xpub event %r" % ev)
        out("SUBSCRIBED " + ev[1:].decode("utf-8", "backslashreplace"))
        topics = a.topics.split(",")
        for i in range(n):
            gap()
            for t in topics:
                s.send(b"%s-%d" % (t.encode(), i))
    elif r == "req":
        for i in range(n):
            gap()
            s.send(b"req-%d" % i)
            out(fmt(s.recv_multipart()))
    elif r == "rep":
        for i in range(n):
            m = s.recv_multipart()
            out(fmt(m))
            s.send_multipart(m)
    elif r == "dealer":
        for i in range(n):
            gap()
            body = b"dealer-%d" % i
            s.send_multipart([b"", body] if a.envelope else [body])
        for i in range(n):
            out(fmt(s.recv_multipart()))
    elif r == "router":
        for i in range(n):
            m = s.recv_multipart()
            out(fmt(m))
            s.send_multipart(m)
    elif r == "pair":
        if a.echo:
            for i in range(n):
                m = s.recv_multipart()
                out(fmt(m))
                s.send_multipart(m)
        else:
            for i in range(n):
                gap()
                s.send(b"pair-%d" % i)
            for i in range(n):
                out(fmt(s.recv_multipart()))
    elif r == "authfail":
        # Never block here: if the server rejects the handshake first,
        # libzmq tears the pipe down and a blocking send waits for the
        # timeout. The monitor below is what decides.
        try:
            s.send(b"should-not-arrive", zmq.NOBLOCK)
        except zmq.Again:
            pass
        failed = (zmq.EVENT_HANDSHAKE_FAILED_AUTH |
                  zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        while True:
            ev = recv_monitor_message(mon)
            if ev["event"] & failed:
                out("AUTH_FAILED %d" % ev["value"])
                break
            if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                sys.exit("peer.py: PLAIN handshake succeeded with bad credentials")
        s.linger = 0

    if a.quiet_ms:
        s.rcvtimeo = a.quiet_ms
        deadline = time.monotonic() + a.quiet_ms / 1000.0
        while time.monotonic() < deadline:
            try:
                out("EXTRA " + fmt(s.recv_multipart()))
            except zmq.Again:
                break
            except zmq.ZMQError:
                break  # e.g. REQ/REP state: nothing can arrive legally

    if mon is not None and a.monitor:
        disc = 0
        while True:
            try:
                ev = recv_monitor_message(mon, zmq.NOBLOCK)
            except zmq.Again:
                break
            if ev["event"] == zmq.EVENT_DISCONNECTED:
                disc += 1
        out("DISCONNECTS %d" % disc)

    out("DONE")
    if a.hold:
        sys.stdin.read()
    if mon is not None:
        s.disable_monitor()
        mon.close(0)
    s.close()
    if auth is not None:
        auth.stop()
    ctx.term()


if __name__ == "__main__":
    try:
        main()
    except zmq.Again:
        sys.stderr.write("peer.py: timed out\n")
        sys.exit(3)
