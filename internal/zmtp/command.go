package zmtp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Command names.
const (
	CmdReady     = "READY"
	CmdError     = "ERROR"
	CmdHello     = "HELLO"
	CmdWelcome   = "WELCOME"
	CmdInitiate  = "INITIATE"
	CmdPing      = "PING"
	CmdPong      = "PONG"
	CmdSubscribe = "SUBSCRIBE"
	CmdCancel    = "CANCEL"
)

// Metadata property names used in READY and INITIATE.
const (
	PropSocketType = "Socket-Type"
	PropIdentity   = "Identity"
)

// libzmqBadError is how libzmq 4.3.x PLAIN servers encode the ERROR
// command they send when authentication fails: the name-size byte and the
// 'E' are replaced by one 0x5E byte. It is accepted as ERROR.
var libzmqBadError = []byte("\x5eRROR")

// ParseCommand decodes the body of a command frame.
func ParseCommand(b []byte) (Command, error) {
	if len(b) == 0 {
		return Command{}, fmt.Errorf("%w: empty", ErrCommand)
	}
	if bytes.HasPrefix(b, libzmqBadError) {
		return Command{Name: CmdError, Body: b[len(libzmqBadError):]}, nil
	}
	n := int(b[0])
	if n == 0 || len(b) < 1+n {
		return Command{}, fmt.Errorf("%w: name length %d in %d bytes", ErrCommand, n, len(b))
	}
	name := b[1 : 1+n]
	for _, c := range name {
		if c <= 0x20 || c > 0x7E {
			return Command{}, fmt.Errorf("%w: bad name byte %#x", ErrCommand, c)
		}
	}
	return Command{Name: string(name), Body: b[1+n:]}, nil
}

// Property is one metadata name/value pair.
type Property struct {
	Name  string
	Value []byte
}

// Metadata is an ordered list of properties.
type Metadata []Property

// Get returns the value of the first property whose name matches
// case-insensitively.
func (md Metadata) Get(name string) ([]byte, bool) {
	for _, p := range md {
		if strings.EqualFold(p.Name, name) {
			return p.Value, true
		}
	}
	return nil, false
}

// AppendMetadata appends the wire form of md to dst. Names must be 1..255
// bytes.
func AppendMetadata(dst []byte, md Metadata) ([]byte, error) {
	for _, p := range md {
		if len(p.Name) == 0 || len(p.Name) > 255 {
			return dst, fmt.Errorf("%w: property name length %d", ErrMetadata, len(p.Name))
		}
		if uint64(len(p.Value)) > 0xFFFFFFFF {
			return dst, fmt.Errorf("%w: property value too long", ErrMetadata)
		}
		dst = append(dst, byte(len(p.Name)))
		dst = append(dst, p.Name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.Value)))
		dst = append(dst, p.Value...)
	}
	return dst, nil
}

// ParseMetadata decodes a metadata block (the body of READY or INITIATE).
// Values alias b.
func ParseMetadata(b []byte) (Metadata, error) {
	var md Metadata
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 {
			return nil, fmt.Errorf("%w: empty property name", ErrMetadata)
		}
		if len(b) < 1+n+4 {
			return nil, fmt.Errorf("%w: truncated property", ErrMetadata)
		}
		name := b[1 : 1+n]
		for _, c := range name {
			if !nameByte(c) {
				return nil, fmt.Errorf("%w: bad property name byte %#x", ErrMetadata, c)
			}
		}
		vl := uint64(binary.BigEndian.Uint32(b[1+n:]))
		rest := b[1+n+4:]
		if uint64(len(rest)) < vl {
			return nil, fmt.Errorf("%w: property %q value of %d bytes in %d", ErrMetadata, name, vl, len(rest))
		}
		md = append(md, Property{Name: string(name), Value: rest[:vl:vl]})
		b = rest[vl:]
	}
	return md, nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '+'
}

// AppendHello appends the body of a PLAIN HELLO command.
func AppendHello(dst []byte, username, password string) ([]byte, error) {
	if len(username) > 255 || len(password) > 255 {
		return dst, fmt.Errorf("%w: PLAIN username or password longer than 255 bytes", ErrCommand)
	}
	dst = append(dst, byte(len(username)))
	dst = append(dst, username...)
	dst = append(dst, byte(len(password)))
	dst = append(dst, password...)
	return dst, nil
}

// ParseHello decodes the body of a PLAIN HELLO command.
func ParseHello(b []byte) (username, password string, err error) {
	if len(b) < 1 {
		return "", "", fmt.Errorf("%w: empty HELLO", ErrCommand)
	}
	un := int(b[0])
	if len(b) < 1+un+1 {
		return "", "", fmt.Errorf("%w: truncated HELLO username", ErrCommand)
	}
	username = string(b[1 : 1+un])
	b = b[1+un:]
	pn := int(b[0])
	if len(b) != 1+pn {
		return "", "", fmt.Errorf("%w: HELLO password length %d in %d bytes", ErrCommand, pn, len(b)-1)
	}
	return username, string(b[1:]), nil
}

// AppendError appends the body of an ERROR command (reason truncated to
// 255 bytes).
func AppendError(dst []byte, reason string) []byte {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	dst = append(dst, byte(len(reason)))
	return append(dst, reason...)
}

// ParseError decodes the body of an ERROR command.
func ParseError(b []byte) (string, error) {
	if len(b) < 1 || len(b) != 1+int(b[0]) {
		return "", fmt.Errorf("%w: bad ERROR body", ErrCommand)
	}
	return string(b[1:]), nil
}

// MaxPingContext is the largest PING context allowed (RFC 37).
const MaxPingContext = 16

// AppendPing appends the body of a PING command: TTL in tenths of a second
// and up to 16 bytes of context.
func AppendPing(dst []byte, ttl uint16, context []byte) []byte {
	if len(context) > MaxPingContext {
		context = context[:MaxPingContext]
	}
	dst = binary.BigEndian.AppendUint16(dst, ttl)
	return append(dst, context...)
}

// ParsePing decodes the body of a PING command. The context aliases b.
func ParsePing(b []byte) (ttl uint16, context []byte, err error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: PING of %d bytes", ErrCommand, len(b))
	}
	context = b[2:]
	if len(context) > MaxPingContext {
		return 0, nil, fmt.Errorf("%w: PING context of %d bytes", ErrCommand, len(context))
	}
	return binary.BigEndian.Uint16(b), context, nil
}
