package bench

import (
	"github.com/fastmq/fastmq/socket"
)

// The benchmark's CURVE server key pair: libzmq's test keys (RFC 26's
// examples), the pair perf.py and perf.c use under --curve. Both ends of a
// --separate run know them without passing a secret between processes;
// they protect nothing, the benchmark only measures what encryption costs.
const (
	benchServerPublic = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
	benchServerSecret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
)

// curveConfig returns cfg made a CURVE server that accepts any client key
// (server: the receiving end, PULL, SUB or REP) or a CURVE client of that
// server with a fresh key pair of its own.
func curveConfig(cfg socket.Config, server bool) (socket.Config, error) {
	pub, err := socket.ParseCurveKey(benchServerPublic)
	if err != nil {
		return cfg, err
	}
	sec, err := socket.ParseCurveKey(benchServerSecret)
	if err != nil {
		return cfg, err
	}
	if server {
		cfg.CurveServer, cfg.CurveSecretKey, cfg.CurveAllowAnyClient = true, sec, true
	} else {
		cfg.CurveServerKey = pub
	}
	return cfg, nil
}

// endConfig returns the configuration of a socket of kind k: kindConfig's,
// and with --curve a CURVE server for the receiving end (recv) or a client
// for the sending end.
func endConfig(o *SocketOptions, cfg socket.Config, k socket.Kind, recv bool) (socket.Config, error) {
	cfg = kindConfig(cfg, k)
	if !o.Curve {
		return cfg, nil
	}
	return curveConfig(cfg, recv)
}

// mechanism is the label of o's security in the printed results.
func mechanism(o *SocketOptions) string {
	if o.Curve {
		return ", curve"
	}
	return ""
}
