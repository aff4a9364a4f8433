package zmtp

import (
	"bytes"
	"fmt"
	"strings"
)

// Config describes the local side of a handshake.
type Config struct {
	SocketType string // e.g. "PUSH"
	Identity   []byte // sent as the Identity property when non-empty
	// Username and Password make this side a PLAIN client when either is
	// non-empty (and Auth is nil).
	Username, Password string
	// Auth makes this side a PLAIN server: a client's HELLO is accepted
	// only if Auth returns true.
	Auth func(username, password string) bool
	// ZMTP30 announces version 3.0 instead of 3.1 (to imitate older
	// peers in tests).
	ZMTP30 bool
	// OnGreeting, if set, is called once the peer's greeting has been
	// read, before the rest of the handshake: the caller may then give
	// the rest more time than the greeting had.
	OnGreeting func()
	// Curve, when set, makes the handshake use CURVE (RFC 26) instead.
	Curve *CurveConfig
	// Authorize, when set, is asked about every peer that passed its
	// mechanism's checks: on the server side of PLAIN and CURVE, and on
	// both sides of NULL. An error refuses the peer.
	Authorize func(AuthRequest) error
	// PeerAddress is the peer's address, passed to Authorize.
	PeerAddress string
}

// Mechanism returns the security mechanism cfg selects.
func (c *Config) Mechanism() string {
	if c.Curve != nil {
		return MechanismCurve
	}
	if c.Auth != nil || c.Username != "" || c.Password != "" {
		return MechanismPlain
	}
	return MechanismNull
}

// PeerInfo is what the handshake learned about the peer.
type PeerInfo struct {
	Greeting   Greeting
	SocketType string
	Identity   []byte
	Metadata   Metadata
	Username   string // PLAIN username accepted by our server side
	ClientKey  Key    // CURVE client key accepted by our server side
}

// Handshake runs the greeting and security handshake on r and w. The caller
// sets any deadline on the underlying connection. On failure it tries to
// tell the peer with an ERROR command where the protocol allows it.
func Handshake(r *Reader, w *Writer, cfg Config) (PeerInfo, error) {
	var info PeerInfo
	mech := cfg.Mechanism()
	minor := uint8(VersionMinor)
	if cfg.ZMTP30 {
		minor = 0
	}
	if err := w.WriteGreeting(Greeting{Major: VersionMajor, Minor: minor, Mechanism: mech, AsServer: cfg.Auth != nil || cfg.Curve != nil && cfg.Curve.Server}); err != nil {
		return info, fmt.Errorf("zmtp: write greeting: %w", err)
	}
	if err := w.Flush(); err != nil {
		return info, fmt.Errorf("zmtp: write greeting: %w", err)
	}
	g, err := r.ReadGreeting()
	if err != nil {
		return info, err
	}
	info.Greeting = g
	if cfg.OnGreeting != nil {
		cfg.OnGreeting()
	}
	if g.Mechanism != mech {
		return info, fmt.Errorf("%w: local %s, peer %s", ErrMechanism, mech, g.Mechanism)
	}
	// Until the peer is through the handshake it may send commands only:
	// a data message is refused at its first frame, before anything it
	// claims is read or allocated.
	savedCmd, savedMsg, savedFrames := r.MaxCmdSize, r.MaxMsgSize, r.MaxFrames
	r.MaxCmdSize, r.MaxMsgSize, r.MaxFrames = 64<<10, 1, 1
	defer func() { r.MaxCmdSize, r.MaxMsgSize, r.MaxFrames = savedCmd, savedMsg, savedFrames }()

	var md []byte
	md, err = AppendMetadata(md, ourMetadata(cfg))
	if err != nil {
		return info, err
	}
	switch {
	case mech == MechanismNull:
		if err := sendCmd(w, CmdReady, md); err != nil {
			return info, err
		}
		body, err := expect(r, CmdReady)
		if err != nil {
			return info, err
		}
		if err := info.setMetadata(body, cfg); err != nil {
			return info, fail(w, err)
		}
		if err := authorize(cfg, AuthRequest{Mechanism: mech}); err != nil {
			return info, fail(w, err)
		}
	case mech == MechanismCurve:
		return info, curveHandshake(r, w, cfg, md, &info)
	case cfg.Auth != nil: // PLAIN server
		body, err := expect(r, CmdHello)
		if err != nil {
			return info, err
		}
		user, pass, err := ParseHello(body)
		if err != nil {
			return info, fail(w, err)
		}
		if !cfg.Auth(user, pass) {
			return info, fail(w, fmt.Errorf("%w: user %q", ErrAuth, user))
		}
		if err := authorize(cfg, AuthRequest{Mechanism: mech, Username: user, Password: pass}); err != nil {
			return info, fail(w, err)
		}
		info.Username = user
		if err := sendCmd(w, CmdWelcome, nil); err != nil {
			return info, err
		}
		body, err = expect(r, CmdInitiate)
		if err != nil {
			return info, err
		}
		if err := info.setMetadata(body, cfg); err != nil {
			return info, fail(w, err)
		}
		if err := sendCmd(w, CmdReady, md); err != nil {
			return info, err
		}
	default: // PLAIN client
		// The peer's as-server flag is not checked: libzmq does not set it
		// reliably, and the roles follow from our own configuration.
		hello, err := AppendHello(nil, cfg.Username, cfg.Password)
		if err != nil {
			return info, err
		}
		if err := sendCmd(w, CmdHello, hello); err != nil {
			return info, err
		}
		if _, err := expect(r, CmdWelcome); err != nil {
			return info, err
		}
		if err := sendCmd(w, CmdInitiate, md); err != nil {
			return info, err
		}
		body, err := expect(r, CmdReady)
		if err != nil {
			return info, err
		}
		if err := info.setMetadata(body, cfg); err != nil {
			return info, err
		}
	}
	return info, nil
}

func ourMetadata(cfg Config) Metadata {
	md := Metadata{{Name: PropSocketType, Value: []byte(cfg.SocketType)}}
	if len(cfg.Identity) > 0 {
		md = append(md, Property{Name: PropIdentity, Value: cfg.Identity})
	}
	return md
}

func (info *PeerInfo) setMetadata(body []byte, cfg Config) error {
	md, err := ParseMetadata(body)
	if err != nil {
		return err
	}
	info.Metadata = md
	st, ok := md.Get(PropSocketType)
	if !ok {
		return fmt.Errorf("%w: no Socket-Type property", ErrMetadata)
	}
	info.SocketType = strings.ToUpper(string(st))
	if !Compatible(cfg.SocketType, info.SocketType) {
		return fmt.Errorf("%w: %s cannot talk to %s", ErrSocketType, cfg.SocketType, info.SocketType)
	}
	if id, ok := md.Get(PropIdentity); ok {
		if len(id) > 255 {
			return fmt.Errorf("%w: identity of %d bytes", ErrMetadata, len(id))
		}
		info.Identity = bytes.Clone(id)
	}
	return nil
}

func sendCmd(w *Writer, name string, body []byte) error {
	if err := w.WriteCommand(name, body); err != nil {
		return fmt.Errorf("zmtp: write %s: %w", name, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("zmtp: write %s: %w", name, err)
	}
	return nil
}

// fail sends an ERROR command carrying err's text (best effort) and returns
// err.
func fail(w *Writer, err error) error {
	reason := err.Error()
	if strings.Contains(reason, ErrAuth.Error()) {
		reason = "authentication failed"
	}
	_ = w.WriteCommand(CmdError, AppendError(nil, reason))
	_ = w.Flush()
	return err
}

// expect reads one command during the handshake and returns its body if its
// name is want. An ERROR from the peer becomes ErrPeerError with the reason.
func expect(r *Reader, want string) ([]byte, error) {
	frames, cmd, err := r.Next(nil)
	if err != nil {
		return nil, fmt.Errorf("zmtp: waiting for %s: %w", want, err)
	}
	if frames != nil {
		return nil, fmt.Errorf("%w: message before handshake completed", ErrUnexpectedCmd)
	}
	if cmd.Name == CmdError {
		reason, err := ParseError(cmd.Body)
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %q", ErrPeerError, reason)
	}
	if cmd.Name != want {
		return nil, fmt.Errorf("%w: got %s, want %s", ErrUnexpectedCmd, cmd.Name, want)
	}
	return cmd.Body, nil
}

// Compatible reports whether a socket of type local may talk to a peer of
// type peer (RFC 23's table, plus XPUB/XSUB).
func Compatible(local, peer string) bool {
	ok := map[string]string{
		"PAIR":   "PAIR",
		"PUB":    "SUB XSUB",
		"XPUB":   "SUB XSUB",
		"SUB":    "PUB XPUB",
		"XSUB":   "PUB XPUB",
		"REQ":    "REP ROUTER",
		"REP":    "REQ DEALER",
		"DEALER": "REP DEALER ROUTER",
		"ROUTER": "REQ DEALER ROUTER",
		"PUSH":   "PULL",
		"PULL":   "PUSH",
	}[local]
	for _, t := range strings.Fields(ok) {
		if t == peer {
			return true
		}
	}
	return false
}
