package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/fastmq/fastmq/socket"
)

// curveOpts are the socket tools' CURVE flags.
type curveOpts struct {
	server    string // secret key file of a CURVE server
	client    string // secret key file of a CURVE client
	serverKey string // the server's public key: Z85 text or a .pub file
	allow     string // a .pub file or a directory of them
	allowAny  bool   // a CURVE server that accepts any client key
}

func addCurveFlags(f *pflag.FlagSet, o *curveOpts) {
	f.StringVar(&o.server, "curve-server", "", "be a CURVE server with the secret key in `FILE` (.key, mode 0600)")
	f.StringVar(&o.client, "curve-client", "", "be a CURVE client with the secret key in `FILE` (.key, mode 0600; needs --curve-serverkey)")
	f.StringVar(&o.serverKey, "curve-serverkey", "", "the CURVE server's public `KEY`: 40 Z85 characters or a .pub file")
	f.StringVar(&o.allow, "allow", "", "CURVE server: accept only the client keys in `FILE|DIR` (a .pub file or a directory of them)")
	f.BoolVar(&o.allowAny, "curve-allow-any", false, "CURVE server: accept any client key (encrypted, but clients are not authenticated)")
}

// applyCurve sets cfg's CURVE fields from o; warn receives a warning for a
// server that accepts any client key.
func applyCurve(cfg *socket.Config, o curveOpts, warn io.Writer) error {
	switch {
	case o.server != "" && (o.client != "" || o.serverKey != ""):
		return errors.New("--curve-server excludes --curve-client and --curve-serverkey")
	case o.client != "" && o.serverKey == "":
		return errors.New("--curve-client needs --curve-serverkey")
	case o.allow != "" && o.server == "":
		return errors.New("--allow needs --curve-server")
	case o.allowAny && o.server == "":
		return errors.New("--curve-allow-any needs --curve-server")
	case o.allowAny && o.allow != "":
		return errors.New("--allow and --curve-allow-any exclude each other")
	}
	if o.server != "" {
		sec, err := socket.LoadCurveSecretKey(o.server)
		if err != nil {
			return err
		}
		cfg.CurveServer, cfg.CurveSecretKey = true, sec
		if o.allow == "" && !o.allowAny {
			return errors.New("a CURVE server needs --allow FILE|DIR (the client keys that may connect), or --curve-allow-any")
		}
		if o.allowAny {
			cfg.CurveAllowAnyClient = true
			fmt.Fprintln(warn, "warning: --curve-allow-any: any client key is accepted (traffic is encrypted, clients are not authenticated)")
			return nil
		}
		st, err := os.Stat(o.allow)
		if err != nil {
			return err
		}
		if st.IsDir() {
			d, err := socket.NewCurveKeyDir(o.allow)
			if err != nil {
				return err
			}
			cfg.Authenticator = d
			return nil
		}
		k, err := socket.LoadCurvePublicKey(o.allow)
		if err != nil {
			return err
		}
		cfg.Authenticator = socket.AllowCurveKeys(k)
		return nil
	}
	if o.serverKey != "" {
		k, err := socket.LoadCurvePublicKey(o.serverKey)
		if err != nil {
			return err
		}
		cfg.CurveServerKey = k
		if o.client != "" {
			sec, err := socket.LoadCurveSecretKey(o.client)
			if err != nil {
				return err
			}
			cfg.CurveSecretKey = sec
		}
	}
	return nil
}
