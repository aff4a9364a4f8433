package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/fastmq/fastmq/internal/zmtp"
)

// CurveKey is a CURVE (Curve25519) public or secret key, 32 bytes. Its
// Z85 method returns the 40-character text libzmq uses (zmq_z85_encode);
// IsZero reports the zero value, which means "no key".
type CurveKey = zmtp.Key

// ParseCurveKey decodes a key from its 40-character Z85 text.
func ParseCurveKey(s string) (CurveKey, error) {
	return zmtp.ParseKey(strings.TrimSpace(s))
}

// NewCurveKeypair returns a new random key pair (as zmq_curve_keypair).
func NewCurveKeypair() (public, secret CurveKey, err error) {
	return zmtp.GenerateKeypair(nil)
}

// CurvePublicKey returns the public key of a secret key (as
// zmq_curve_public).
func CurvePublicKey(secret CurveKey) CurveKey { return zmtp.PublicKey(secret) }

// ErrKeyFileMode reports a secret key file that others may read.
var ErrKeyFileMode = errors.New("socket: secret key file is readable by others")

// WriteCurveKeypair writes name+".key" (the secret key, mode 0600) and
// name+".pub" (the public key, mode 0644), each one line of 40 Z85
// characters, as a libzmq program reads them. It refuses to overwrite
// either file.
func WriteCurveKeypair(name string, public, secret CurveKey) error {
	if err := writeNew(name+".key", secret.Z85()+"\n", 0o600); err != nil {
		return err
	}
	if err := writeNew(name+".pub", public.Z85()+"\n", 0o644); err != nil {
		_ = os.Remove(name + ".key")
		return err
	}
	return nil
}

func writeNew(path, text string, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("socket: write key: %w", err)
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("socket: write key %s: %w", path, err)
	}
	return nil
}

// LoadCurveSecretKey reads a secret key file written by WriteCurveKeypair
// (one line of 40 Z85 characters). Like ssh, it refuses a file that its
// group or others may read or write.
func LoadCurveSecretKey(path string) (CurveKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return CurveKey{}, fmt.Errorf("socket: secret key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return CurveKey{}, fmt.Errorf("%w: %s has mode %04o; it must be 0600 or stricter (chmod 600 %s)",
			ErrKeyFileMode, path, st.Mode().Perm(), path)
	}
	return loadKeyFile(path)
}

// LoadCurvePublicKey returns the public key in a file (one line of 40 Z85
// characters, such as a .pub file from WriteCurveKeypair), or, when s is
// itself 40 characters of Z85 and no such file exists, the key s spells.
func LoadCurvePublicKey(s string) (CurveKey, error) {
	if len(s) == zmtp.KeyTextSize {
		if _, err := os.Stat(s); errors.Is(err, fs.ErrNotExist) {
			return ParseCurveKey(s)
		}
	}
	return loadKeyFile(s)
}

func loadKeyFile(path string) (CurveKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return CurveKey{}, fmt.Errorf("socket: key file: %w", err)
	}
	if len(b) > 1024 {
		return CurveKey{}, fmt.Errorf("socket: key file %s: %d bytes is no key", path, len(b))
	}
	k, err := ParseCurveKey(string(b))
	if err != nil {
		return CurveKey{}, fmt.Errorf("socket: key file %s: %w", path, err)
	}
	return k, nil
}

// curveHandshake returns the handshake's CURVE settings for a normalized
// config, or nil for NULL and PLAIN.
func (c Config) curveHandshake() *zmtp.CurveConfig {
	switch {
	case c.CurveServer:
		return &zmtp.CurveConfig{Server: true, SecretKey: c.CurveSecretKey}
	case !c.CurveServerKey.IsZero():
		return &zmtp.CurveConfig{SecretKey: c.CurveSecretKey, ServerKey: c.CurveServerKey}
	}
	return nil
}

// checkCurve validates the CURVE settings; a client without a secret key
// gets a fresh one.
func (c *Config) checkCurve() error {
	curve := c.CurveServer || !c.CurveServerKey.IsZero() || c.CurveServerKeyFor != nil
	if c.CurveServerKeyFor != nil && (c.CurveServer || !c.CurveServerKey.IsZero()) {
		return fmt.Errorf("socket: CurveServerKeyFor excludes CurveServer and CurveServerKey")
	}
	if !curve {
		if !c.CurveSecretKey.IsZero() || !c.CurvePublicKey.IsZero() {
			return fmt.Errorf("socket: a CURVE key is set, but neither CurveServer nor CurveServerKey")
		}
		return nil
	}
	if c.CurveServer && !c.CurveServerKey.IsZero() {
		return fmt.Errorf("socket: a socket is either a CURVE server or a CURVE client")
	}
	if c.PlainAuth != nil || c.PlainUsername != "" || c.PlainPassword != "" {
		return fmt.Errorf("socket: a socket uses either CURVE or PLAIN")
	}
	if c.CurveSecretKey.IsZero() {
		if c.CurveServer {
			return fmt.Errorf("socket: a CURVE server needs CurveSecretKey")
		}
		_, sec, err := NewCurveKeypair()
		if err != nil {
			return err
		}
		c.CurveSecretKey = sec
		c.CurvePublicKey = CurveKey{}
	}
	if !c.CurvePublicKey.IsZero() && c.CurvePublicKey != CurvePublicKey(c.CurveSecretKey) {
		return fmt.Errorf("socket: CurvePublicKey is not the public key of CurveSecretKey")
	}
	return nil
}
