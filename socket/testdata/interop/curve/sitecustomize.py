"""CURVE settings for the interop peers (peer.py), without changing them.

The Go tests put this directory first on PYTHONPATH, so python imports this
module at startup, before peer.py parses its arguments. It takes its own
options out of sys.argv (so peer.py never sees them) and applies them to
the first socket peer.py makes (its own; not the monitor):

  --curve-server SECRET               a CURVE server (Z85 secret key)
  --curve-client SECRET PUBLIC SERVER a CURVE client (Z85 keys)
  --zap-allow KEYS                    for a server: start a ZAP handler
                                      (RFC 27) that accepts only these client
                                      keys (comma separated; "-": none).
                                      Without it libzmq accepts any key.

For processes whose arguments are not ours (perf.py's workers), the
environment variable FASTMQ_PY_CURVE_AUTO="SERVERSEC SERVERPUB CLIENTSEC
CLIENTPUB" makes every socket that binds a CURVE server and every socket
that connects a CURVE client of it.
"""
import os
import sys
import threading

_server = _client = _allow = None
_argv = sys.argv[:1]
_i = 1
while _i < len(sys.argv):
    _a = sys.argv[_i]
    if _a == "--curve-server":
        _server = sys.argv[_i + 1]
        _i += 2
    elif _a == "--curve-client":
        _client = sys.argv[_i + 1:_i + 4]
        _i += 4
    elif _a == "--zap-allow":
        _allow = sys.argv[_i + 1]
        _i += 2
    else:
        _argv.append(_a)
        _i += 1
sys.argv[:] = _argv

if _server or _client:
    import zmq
    import zmq.utils.z85

    _orig_socket = zmq.Context.socket
    _zap = []
    _done = []

    def _zap_handler(ctx, ready):
        z = _orig_socket(ctx, zmq.REP)
        z.linger = 0
        z.bind("inproc://zeromq.zap.01")
        ready.set()
        keys = set(k for k in _allow.split(",") if k and k != "-")
        while True:
            try:
                req = z.recv_multipart()
            except zmq.ZMQError:
                z.close(0)
                return
            version, rid, mech = req[0], req[1], req[5]
            key = ""
            if mech == b"CURVE" and len(req) > 6:
                key = zmq.utils.z85.encode(req[6]).decode()
            ok = key in keys
            z.send_multipart([version, rid, b"200" if ok else b"400",
                              b"OK" if ok else b"key not allowed", b"", b""])

    def _socket(self, kind, *args, **kw):
        s = _orig_socket(self, kind, *args, **kw)
        if _done:
            return s  # e.g. the monitor socket: only peer.py's own one
        _done.append(True)
        if _server:
            if _allow is not None and not _zap:
                ready = threading.Event()
                t = threading.Thread(target=_zap_handler, args=(self, ready), daemon=True)
                t.start()
                ready.wait()
                _zap.append(t)
            s.curve_secretkey = _server.encode()
            s.curve_server = True
        else:
            s.curve_secretkey = _client[0].encode()
            s.curve_publickey = _client[1].encode()
            s.curve_serverkey = _client[2].encode()
        return s

    zmq.Context.socket = _socket

_auto = os.environ.get("FASTMQ_PY_CURVE_AUTO", "").split()
if len(_auto) == 4:
    import zmq

    _orig_bind = zmq.Socket.bind
    _orig_connect = zmq.Socket.connect

    def _bind(self, addr):
        self.curve_secretkey = _auto[0].encode()
        self.curve_server = True
        return _orig_bind(self, addr)

    def _connect(self, addr):
        self.curve_secretkey = _auto[2].encode()
        self.curve_publickey = _auto[3].encode()
        self.curve_serverkey = _auto[1].encode()
        return _orig_connect(self, addr)

    zmq.Socket.bind = _bind
    zmq.Socket.connect = _connect
