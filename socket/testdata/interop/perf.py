#!/usr/bin/env python3
"""libzmq's own figures for the FastMQ comparison benchmarks.

Usage:
  perf.py thr --transport tcp|ipc --size N --count N [--native] [--curve]
  perf.py lat --transport tcp|ipc --size N --count N [--native] [--curve]

"thr" runs a PULL receiver (bind) and a PUSH sender (connect) in two separate
processes, in the style of libzmq's local_thr/remote_thr: the receiver times
from the first to the last message. "lat" runs a REP echo server and a REQ
client in two processes; the client times every round trip and reports
p50/p90/p99. Both ends are libzmq sockets; the result is one JSON line.

By default both ends are pyzmq processes with tight send/recv loops, so the
figure includes Python's per-message cost. With --native the two ends are a
small C program (perf.c next to this script) compiled with the system C
compiler and linked directly against libzmq.so.5 (no headers needed): that
is libzmq's figure without Python in the loop.

With --curve both ends use CURVE security (RFC 26): the binding end is the
server, the connecting end its client, with libzmq's test key pairs.

The worker modes local_thr, remote_thr, local_lat, remote_lat take
ENDPOINT SIZE COUNT [curve] and can be run by hand on two terminals.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# libzmq's test key pairs (RFC 26's examples), as perf.c has them.
SERVER_PUBLIC = bytes.fromhex("54fcba24e93249969316fb617c872bb0c1d1ff14800427c594cbfacf1bc2d652")
SERVER_SECRET = bytes.fromhex("8e0bdd697628b91d8f245587ee95c5b04d48963f79259877b49cd9063aead3b7")
CLIENT_PUBLIC = bytes.fromhex("bb88471d65e2659b30c55a5321cebb5aab2b70a398645c26dca2b2fcb43fc518")
CLIENT_SECRET = bytes.fromhex("7bb864b489afa3671fbe69101f94b38972f24816dfb01b51656b3fec8dfd0888")


def secure(zmq, s, server):
    """Makes s a CURVE server or client with the test keys."""
    if server:
        s.setsockopt(zmq.CURVE_SERVER, 1)
        s.setsockopt(zmq.CURVE_SECRETKEY, SERVER_SECRET)
    else:
        s.setsockopt(zmq.CURVE_SERVERKEY, SERVER_PUBLIC)
        s.setsockopt(zmq.CURVE_PUBLICKEY, CLIENT_PUBLIC)
        s.setsockopt(zmq.CURVE_SECRETKEY, CLIENT_SECRET)


def worker(mode, endpoint, size, count, curve=False):
    import zmq
    ctx = zmq.Context()

    def bind(s):
        if curve:
            secure(zmq, s, True)
        s.bind(endpoint)

    def connect(s):
        if curve:
            secure(zmq, s, False)
        s.connect(endpoint)

    if mode == "local_thr":
        s = ctx.socket(zmq.PULL)
        s.rcvhwm = 0
        bind(s)
        print("READY", flush=True)
        s.recv()
        t0 = time.perf_counter()
        for _ in range(count - 1):
            s.recv()
        el = time.perf_counter() - t0
        print(json.dumps({"elapsed_s": el, "count": count - 1}), flush=True)
    elif mode == "local_sub":
        s = ctx.socket(zmq.SUB)
        s.rcvhwm = 0
        s.setsockopt(zmq.SUBSCRIBE, b"")
        bind(s)
        print("READY", flush=True)
        s.recv()
        t0 = time.perf_counter()
        for _ in range(count - 1):
            s.recv()
        el = time.perf_counter() - t0
        print(json.dumps({"elapsed_s": el, "count": count - 1}), flush=True)
    elif mode == "remote_pub":
        s = ctx.socket(zmq.PUB)
        s.sndhwm = 0
        s.linger = -1
        connect(s)
        time.sleep(1)  # the slow joiner: let the subscription arrive
        msg = b"x" * size
        for _ in range(count):
            s.send(msg)
    elif mode == "remote_thr":
        s = ctx.socket(zmq.PUSH)
        s.sndhwm = 0
        s.linger = -1
        connect(s)
        msg = b"x" * size
        for _ in range(count):
            s.send(msg)
    elif mode == "local_lat":
        s = ctx.socket(zmq.REP)
        bind(s)
        print("READY", flush=True)
        for _ in range(count):
            s.send(s.recv())
    elif mode == "remote_lat":
        s = ctx.socket(zmq.REQ)
        connect(s)
        msg = b"x" * size
        lats = []
        pc = time.perf_counter_ns
        for _ in range(count):
            t = pc()
            s.send(msg)
            s.recv()
            lats.append(pc() - t)
        print(json.dumps({"lat_ns": lats}), flush=True)
    s.close()
    ctx.term()


def native_binary(tmp):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("perf.py: --native needs a C compiler")
    lib = None
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
              "/usr/lib64", "/usr/lib", "/usr/local/lib"):
        if os.path.exists(os.path.join(d, "libzmq.so.5")):
            lib = os.path.join(d, "libzmq.so.5")
            break
    if lib is None:
        sys.exit("perf.py: libzmq.so.5 not found")
    out = os.path.join(tmp, "perf")
    subprocess.check_call([cc, "-O2", "-o", out,
                           os.path.join(HERE, "perf.c"), lib])
    return out


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0
    i = min(len(sorted_vals) - 1, int(round(p / 100.0 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def drive(kind, transport, size, count, native, curve=False):
    tmp = tempfile.mkdtemp(prefix="fastmq-perf-")
    try:
        if transport == "ipc":
            ep = "ipc://" + os.path.join(tmp, "perf.sock")
        elif transport == "tcp":
            import socket
            so = socket.socket()
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
            so.close()
            ep = "tcp://127.0.0.1:%d" % port
        else:
            sys.exit("perf.py: transport must be tcp or ipc")
        if native:
            exe = [native_binary(tmp)]
        else:
            exe = [sys.executable, os.path.abspath(__file__)]
        local, remote = {"thr": ("local_thr", "remote_thr"), "lat": ("local_lat", "remote_lat"),
                         "pub": ("local_sub", "remote_pub")}[kind]
        args = [ep, str(size), str(count)] + (["curve"] if curve else [])
        lp = subprocess.Popen(exe + [local] + args, stdout=subprocess.PIPE, text=True)
        if lp.stdout.readline().strip() != "READY":
            sys.exit("perf.py: receiver did not start")
        rp = subprocess.Popen(exe + [remote] + args, stdout=subprocess.PIPE, text=True)
        rout, _ = rp.communicate()
        lout, _ = lp.communicate()
        if rp.returncode or lp.returncode:
            sys.exit("perf.py: worker failed")
        res = {"impl": "libzmq-native" if native else "libzmq-pyzmq",
               "transport": transport, "size": size, "count": count,
               "mechanism": "curve" if curve else "null"}
        if kind in ("thr", "pub"):
            r = json.loads(lout)
            rate = r["count"] / r["elapsed_s"] if r["elapsed_s"] > 0 else 0
            res.update(pattern="pushpull" if kind == "thr" else "pubsub", msgs_per_s=rate,
                       mb_per_s=rate * size / 1e6)
        else:
            lats = sorted(json.loads(rout)["lat_ns"])
            tot = sum(lats) / 1e9
            rate = len(lats) / tot if tot else 0
            res.update(pattern="reqrep", msgs_per_s=rate, mb_per_s=rate * size / 1e6,
                       p50_us=percentile(lats, 50) / 1e3,
                       p90_us=percentile(lats, 90) / 1e3,
                       p99_us=percentile(lats, 99) / 1e3)
        print(json.dumps(res), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    signal.alarm(120)
    argv = sys.argv[1:]
    workers = ("local_thr", "remote_thr", "local_lat", "remote_lat", "local_sub", "remote_pub")
    if len(argv) in (4, 5) and argv[0] in workers:
        if len(argv) == 5 and argv[4] != "curve":
            sys.exit("perf.py: the fifth worker argument can only be curve")
        worker(argv[0], argv[1], int(argv[2]), int(argv[3]), len(argv) == 5)
        return
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["thr", "lat", "pub"])
    ap.add_argument("--transport", default="tcp")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--curve", action="store_true")
    a = ap.parse_args(argv)
    count = a.count or (200000 if a.kind == "thr" else 20000)
    drive(a.kind, a.transport, a.size, count, a.native, a.curve)


if __name__ == "__main__":
    main()
