package zmtp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/nacl/box"
)

// MechanismCurve is the CurveZMQ security mechanism (RFC 26).
const MechanismCurve = "CURVE"

// CmdMessage is the CURVE command that carries one encrypted frame.
const CmdMessage = "MESSAGE"

// ErrCurve reports a CURVE command that is malformed, does not decrypt, or
// breaks the nonce sequence.
var ErrCurve = errors.New("zmtp: curve")

// CurveConfig makes a handshake use CURVE (RFC 26). It is read-only once
// given to Handshake and may be shared by many connections.
type CurveConfig struct {
	// Server makes this side the CURVE server; SecretKey is then the
	// server's long-term secret key, whose public key clients must know.
	Server bool
	// SecretKey is this side's long-term secret key (the public key is
	// derived from it). A client's public key is what the server's
	// authenticator sees.
	SecretKey Key
	// ServerKey is the server's long-term public key (client side only).
	ServerKey Key
}

// Sizes of the CURVE handshake command bodies (after the command name),
// as libzmq lays them out.
const (
	helloBodySize    = 2 + 72 + 32 + 8 + 80 // version, padding, C', nonce, box
	welcomeBodySize  = 16 + 144             // nonce, box [S' + cookie]
	initiateMinBody  = 96 + 8 + 16 + 128    // cookie, nonce, box [C + vouch]
	readyMinBody     = 8 + 16               // nonce, box [metadata]
	boxOverhead      = box.Overhead
	shortNoncePrefix = 16
)

// curveHandshake runs the CURVE handshake after the greetings and, when
// it succeeds, switches r and w to MESSAGE framing.
func curveHandshake(r *Reader, w *Writer, cfg Config, md []byte, info *PeerInfo) error {
	run := curveClient
	if cfg.Curve.Server {
		run = curveServer
	}
	in, out, err := run(r, w, cfg, md, info)
	if err != nil {
		return err
	}
	r.curve, w.curve = in, out
	return nil
}

// curveClient runs the client side of the CURVE handshake after the
// greetings and returns the ciphers for the traffic that follows.
func curveClient(r *Reader, w *Writer, cfg Config, md []byte, info *PeerInfo) (*curveIn, *curveOut, error) {
	cc := cfg.Curve
	ourPub := PublicKey(cc.SecretKey)
	cnPub, cnSec, err := GenerateKeypair(nil)
	if err != nil {
		return nil, nil, err
	}
	defer clear(cnSec[:])
	var nonce uint64 = 1

	// HELLO: version 1.0, 72 bytes of anti-amplification padding, C',
	// short nonce, Box[64 zero bytes](C'->S).
	hello := make([]byte, 0, helloBodySize)
	hello = append(hello, 1, 0)
	hello = append(hello, make([]byte, 72)...)
	hello = append(hello, cnPub[:]...)
	hello = binary.BigEndian.AppendUint64(hello, nonce)
	n := shortNonce("CurveZMQHELLO---", nonce)
	k, err := precompute(&cc.ServerKey, &cnSec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: server key: %w", ErrCurve, err)
	}
	hello = box.SealAfterPrecomputation(hello, make([]byte, 64), &n, k)
	if err := sendCmd(w, CmdHello, hello); err != nil {
		return nil, nil, err
	}
	nonce++

	body, err := expect(r, CmdWelcome)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: server closed the connection after HELLO (wrong server key?): %w", ErrCurve, err)
		}
		return nil, nil, explainRefusal(err)
	}
	if len(body) != welcomeBodySize {
		return nil, nil, fmt.Errorf("%w: WELCOME of %d bytes, want %d", ErrCurve, len(body), welcomeBodySize)
	}
	var ln [24]byte
	copy(ln[:], "WELCOME-")
	copy(ln[8:], body[:16])
	var wbuf [128]byte
	welcome, ok := box.Open(wbuf[:0], body[16:], &ln, (*[32]byte)(&cc.ServerKey), (*[32]byte)(&cnSec))
	if !ok {
		return nil, nil, fmt.Errorf("%w: WELCOME does not open (wrong server key?)", ErrCurve)
	}
	var snPub Key
	copy(snPub[:], welcome[:32])
	cookie := welcome[32:128]
	shared, err := precompute(&snPub, &cnSec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: server short-term key: %w", ErrCurve, err)
	}

	// INITIATE: cookie, short nonce, Box[C + vouch nonce + vouch +
	// metadata](C'->S'), where vouch = Box[C' + S](C->S').
	var vn [24]byte
	copy(vn[:], "VOUCH---")
	if _, err := io.ReadFull(rand.Reader, vn[8:]); err != nil {
		return nil, nil, fmt.Errorf("zmtp: vouch nonce: %w", err)
	}
	var vplain [64]byte
	copy(vplain[:32], cnPub[:])
	copy(vplain[32:], cc.ServerKey[:])
	vk, err := precompute(&snPub, &cc.SecretKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: server short-term key: %w", ErrCurve, err)
	}
	plain := make([]byte, 0, 128+len(md))
	plain = append(plain, ourPub[:]...)
	plain = append(plain, vn[8:]...)
	plain = box.SealAfterPrecomputation(plain, vplain[:], &vn, vk)
	plain = append(plain, md...)
	init := make([]byte, 0, 96+8+boxOverhead+len(plain))
	init = append(init, cookie...)
	init = binary.BigEndian.AppendUint64(init, nonce)
	n = shortNonce("CurveZMQINITIATE", nonce)
	init = box.SealAfterPrecomputation(init, plain, &n, shared)
	if err := sendCmd(w, CmdInitiate, init); err != nil {
		return nil, nil, err
	}
	nonce++

	body, err = expect(r, CmdReady)
	if err != nil {
		return nil, nil, explainRefusal(err)
	}
	if len(body) < readyMinBody {
		return nil, nil, fmt.Errorf("%w: READY of %d bytes", ErrCurve, len(body))
	}
	peerNonce := binary.BigEndian.Uint64(body)
	if peerNonce == 0 {
		return nil, nil, fmt.Errorf("%w: READY nonce 0", ErrCurve)
	}
	n = shortNonce("CurveZMQREADY---", peerNonce)
	rmd, ok := box.OpenAfterPrecomputation(nil, body[8:], &n, shared)
	if !ok {
		return nil, nil, fmt.Errorf("%w: READY does not open", ErrCurve)
	}
	if err := info.setMetadata(rmd, cfg); err != nil {
		return nil, nil, err
	}
	in := &curveIn{key: shared, last: peerNonce}
	copy(in.prefix[:], "CurveZMQMESSAGES")
	out := &curveOut{key: shared, next: nonce}
	copy(out.prefix[:], "CurveZMQMESSAGEC")
	return in, out, nil
}

// curveServer runs the server side of the CURVE handshake after the
// greetings. Between WELCOME and INITIATE it holds nothing but what the
// cookie carries back: the short-term secret key is forgotten once sealed
// in the cookie, and recovered from the INITIATE's cookie.
func curveServer(r *Reader, w *Writer, cfg Config, md []byte, info *PeerInfo) (*curveIn, *curveOut, error) {
	cc := cfg.Curve
	body, err := expect(r, CmdHello)
	if err != nil {
		return nil, nil, err
	}
	if len(body) != helloBodySize {
		return nil, nil, refuse(w, fmt.Errorf("%w: HELLO of %d bytes, want %d", ErrCurve, len(body), helloBodySize))
	}
	if body[0] != 1 || body[1] != 0 {
		return nil, nil, refuse(w, fmt.Errorf("%w: HELLO version %d.%d", ErrCurve, body[0], body[1]))
	}
	var cnClient Key
	copy(cnClient[:], body[74:106])
	helloNonce := binary.BigEndian.Uint64(body[106:114])
	n := shortNonce("CurveZMQHELLO---", helloNonce)
	k, err := precompute(&cnClient, &cc.SecretKey)
	if err != nil {
		return nil, nil, refuse(w, fmt.Errorf("%w: client short-term key: %w", ErrCurve, err))
	}
	var hbuf [64]byte
	if _, ok := box.OpenAfterPrecomputation(hbuf[:0], body[114:], &n, k); !ok {
		return nil, nil, refuse(w, fmt.Errorf("%w: HELLO does not open (client has the wrong server key?)", ErrCurve))
	}

	// WELCOME: Box[S' + cookie](S->C'), with cookie = Box[C' + s'](t).
	snPub, snSec, err := GenerateKeypair(nil)
	if err != nil {
		return nil, nil, err
	}
	cookie, err := serverCookies.sealCookie(&cnClient, &snSec)
	clear(snSec[:])
	if err != nil {
		return nil, nil, err
	}
	wplain := make([]byte, 0, 128)
	wplain = append(wplain, snPub[:]...)
	wplain = append(wplain, cookie...)
	var ln [24]byte
	copy(ln[:], "WELCOME-")
	if _, err := io.ReadFull(rand.Reader, ln[8:]); err != nil {
		return nil, nil, fmt.Errorf("zmtp: welcome nonce: %w", err)
	}
	welcome := make([]byte, 0, welcomeBodySize)
	welcome = append(welcome, ln[8:]...)
	welcome = box.SealAfterPrecomputation(welcome, wplain, &ln, k)
	if err := sendCmd(w, CmdWelcome, welcome); err != nil {
		return nil, nil, err
	}

	body, err = expect(r, CmdInitiate)
	if err != nil {
		return nil, nil, err
	}
	if len(body) < initiateMinBody {
		return nil, nil, refuse(w, fmt.Errorf("%w: INITIATE of %d bytes", ErrCurve, len(body)))
	}
	cPub, snSec, err := serverCookies.openCookie(body[:96])
	defer clear(snSec[:])
	if err != nil {
		return nil, nil, refuse(w, err)
	}
	if cPub != cnClient {
		return nil, nil, refuse(w, fmt.Errorf("%w: cookie of another client", ErrCurve))
	}
	initNonce := binary.BigEndian.Uint64(body[96:104])
	if initNonce <= helloNonce {
		return nil, nil, refuse(w, fmt.Errorf("%w: INITIATE nonce %d not after HELLO's %d", ErrCurve, initNonce, helloNonce))
	}
	shared, err := precompute(&cnClient, &snSec)
	if err != nil {
		return nil, nil, refuse(w, err)
	}
	n = shortNonce("CurveZMQINITIATE", initNonce)
	plain, ok := box.OpenAfterPrecomputation(nil, body[104:], &n, shared)
	if !ok {
		return nil, nil, refuse(w, fmt.Errorf("%w: INITIATE does not open", ErrCurve))
	}
	var clientKey Key
	copy(clientKey[:], plain[:32])
	var vn [24]byte
	copy(vn[:], "VOUCH---")
	copy(vn[8:], plain[32:48])
	vk, err := precompute(&clientKey, &snSec)
	if err != nil {
		return nil, nil, refuse(w, fmt.Errorf("%w: client key: %w", ErrCurve, err))
	}
	var vbuf [64]byte
	vouch, ok := box.OpenAfterPrecomputation(vbuf[:0], plain[48:128], &vn, vk)
	if !ok {
		return nil, nil, refuse(w, fmt.Errorf("%w: vouch does not open", ErrCurve))
	}
	if !bytes.Equal(vouch[:32], cnClient[:]) || !bytes.Equal(vouch[32:64], PublicKey(cc.SecretKey).bytes()) {
		return nil, nil, refuse(w, fmt.Errorf("%w: vouch for another connection", ErrCurve))
	}
	info.ClientKey = clientKey
	if err := info.setMetadata(plain[128:], cfg); err != nil {
		return nil, nil, refuse(w, err)
	}
	if err := authorize(cfg, AuthRequest{Mechanism: MechanismCurve, ClientKey: clientKey}); err != nil {
		return nil, nil, refuse(w, err)
	}

	// READY: short nonce 1, Box[metadata](S'->C').
	var nonce uint64 = 1
	ready := make([]byte, 0, 8+boxOverhead+len(md))
	ready = binary.BigEndian.AppendUint64(ready, nonce)
	n = shortNonce("CurveZMQREADY---", nonce)
	ready = box.SealAfterPrecomputation(ready, md, &n, shared)
	if err := sendCmd(w, CmdReady, ready); err != nil {
		return nil, nil, err
	}
	nonce++
	in := &curveIn{key: shared, last: initNonce}
	copy(in.prefix[:], "CurveZMQMESSAGEC")
	out := &curveOut{key: shared, next: nonce}
	copy(out.prefix[:], "CurveZMQMESSAGES")
	return in, out, nil
}

func (k Key) bytes() []byte { return k[:] }

// fullNonce returns the 24-byte nonce of a 16-byte prefix and a short
// nonce.
func fullNonce(prefix *[16]byte, n uint64) [24]byte {
	var b [24]byte
	copy(b[:shortNoncePrefix], prefix[:])
	binary.BigEndian.PutUint64(b[shortNoncePrefix:], n)
	return b
}

// shortNonce returns the 24-byte nonce of a 16-byte prefix and a short
// (8-byte) nonce.
func shortNonce(prefix string, n uint64) [24]byte {
	var b [24]byte
	copy(b[:shortNoncePrefix], prefix)
	binary.BigEndian.PutUint64(b[shortNoncePrefix:], n)
	return b
}

// explainRefusal adds what a CURVE server's ERROR "400" (ZAP's
// authentication failure) means.
func explainRefusal(err error) error {
	if errors.Is(err, ErrPeerError) && strings.HasSuffix(err.Error(), `"400"`) {
		return fmt.Errorf("%w (the server refused our key, or we have the wrong server key)", err)
	}
	return err
}

// refuse sends a CURVE client an ERROR with ZAP's status code 400 (best
// effort) and returns err. libzmq reports an ERROR as a handshake failure
// (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) only when it carries such a code; the
// details stay on our side, in err.
func refuse(w *Writer, err error) error {
	_ = w.WriteCommand(CmdError, AppendError(nil, "400"))
	_ = w.Flush()
	return err
}
