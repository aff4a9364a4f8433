package zmtp

import "fmt"

// AuthRequest is what an authorizer learns about a peer that passed its
// security mechanism's own checks, with the meaning of a ZAP request
// (RFC 27).
type AuthRequest struct {
	Mechanism string // MechanismNull, MechanismPlain or MechanismCurve
	Address   string // the peer's address (Config.PeerAddress)
	// Identity is the local socket's identity (ZAP's "identity" frame),
	// not the peer's.
	Identity []byte
	// Username and Password are the PLAIN credentials.
	Username, Password string
	// ClientKey is a CURVE client's long-term public key.
	ClientKey Key
}

// authorize asks cfg.Authorize about the peer, if it is set. A refusal is
// wrapped in ErrAuth; its text goes to the peer in an ERROR command.
func authorize(cfg Config, req AuthRequest) error {
	if cfg.Authorize == nil {
		return nil
	}
	req.Address = cfg.PeerAddress
	req.Identity = cfg.Identity
	if err := cfg.Authorize(req); err != nil {
		return fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return nil
}
