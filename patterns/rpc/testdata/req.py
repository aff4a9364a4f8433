#!/usr/bin/env python3
"""A plain libzmq REQ client (pyzmq) for the rpc interop test.

Usage: req.py ENDPOINT REQUEST...

Sends each request on one REQ socket, waits for its reply (5 s at most) and
prints the reply's frames joined by TAB, one line per request.
"""

import signal
import sys

import zmq


def main():
    signal.alarm(20)
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, 5000)
    s.connect(sys.argv[1])
    for req in sys.argv[2:]:
        s.send(req.encode())
        frames = s.recv_multipart()
        sys.stdout.write("\t".join(f.decode() for f in frames) + "\n")
        sys.stdout.flush()
    s.close()
    ctx.term()


if __name__ == "__main__":
    main()
