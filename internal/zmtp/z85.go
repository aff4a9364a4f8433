package zmtp

import (
	"errors"
	"fmt"
)

// ErrZ85 reports text that is not valid Z85 (ZeroMQ RFC 32).
var ErrZ85 = errors.New("zmtp: invalid z85")

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Decoder maps a byte to its Z85 digit, or 0xFF when it is not one.
var z85Decoder = func() (d [256]byte) {
	for i := range d {
		d[i] = 0xFF
	}
	for i := range len(z85Alphabet) {
		d[z85Alphabet[i]] = byte(i)
	}
	return d
}()

// Z85Encode returns the Z85 text of src, as libzmq's zmq_z85_encode: src's
// length must be a multiple of 4, and the text is 5/4 as long.
func Z85Encode(src []byte) (string, error) {
	if len(src)%4 != 0 {
		return "", fmt.Errorf("%w: %d bytes is not a multiple of 4", ErrZ85, len(src))
	}
	out := make([]byte, 0, len(src)/4*5)
	for i := 0; i < len(src); i += 4 {
		v := uint32(src[i])<<24 | uint32(src[i+1])<<16 | uint32(src[i+2])<<8 | uint32(src[i+3])
		var d [5]byte
		for j := 4; j >= 0; j-- {
			d[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, d[:]...)
	}
	return string(out), nil
}

// Z85Decode returns the bytes that the Z85 text s encodes, as libzmq's
// zmq_z85_decode: s must be a non-empty multiple of 5 characters of the
// Z85 alphabet, and no group may stand for more than 32 bits.
func Z85Decode(s string) ([]byte, error) {
	if len(s) < 5 || len(s)%5 != 0 {
		return nil, fmt.Errorf("%w: length %d is not a positive multiple of 5", ErrZ85, len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			c := s[i+j]
			d := z85Decoder[c]
			if d == 0xFF {
				return nil, fmt.Errorf("%w: character %q at %d", ErrZ85, c, i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("%w: group at %d exceeds 32 bits", ErrZ85, i)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}
