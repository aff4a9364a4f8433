package spool

import (
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codec is the compression applied to a stored batch.
type Codec uint8

// Codecs. Batches are compressed as a whole: single small records do not compress.
const (
	CodecNone Codec = iota // stored as is
	CodecS2                // klauspost/compress s2 block format
	CodecZstd              // zstd, fastest level, one frame per batch
)

// String returns "none", "s2" or "zstd".
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecS2:
		return "s2"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec parses "none", "s2" or "zstd" (case-insensitive).
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return CodecNone, nil
	case "s2":
		return CodecS2, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("spool: unknown codec %q", s)
}

// SyncPolicy says when Append returns.
type SyncPolicy int

// Sync policies.
const (
	// SyncGroup (the zero value): records are fsynced in groups, when
	// Config.GroupRecords records are waiting or Config.GroupInterval has passed
	// since the first of them was written; Append returns after that fsync.
	SyncGroup SyncPolicy = iota
	// SyncEach: every Append is fsynced before it returns (concurrent Appends
	// share one fsync).
	SyncEach
	// SyncNone: Append returns once the records are written to the operating
	// system; they survive a crash of the process but not of the machine.
	SyncNone
)

// String returns "group", "each" or "none".
func (p SyncPolicy) String() string {
	switch p {
	case SyncGroup:
		return "group"
	case SyncEach:
		return "each"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("sync(%d)", int(p))
}

// ParseSyncPolicy parses "group", "each" or "none" (case-insensitive).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch strings.ToLower(s) {
	case "group", "":
		return SyncGroup, nil
	case "each":
		return SyncEach, nil
	case "none", "os":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("spool: unknown sync policy %q", s)
}

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
)

func zstdEncoder() *zstd.Encoder {
	zstdEncOnce.Do(func() {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // static options
		}
		zstdEnc = e
	})
	return zstdEnc
}

func zstdDecoder() *zstd.Decoder {
	zstdDecOnce.Do(func() {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(4),
			zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(1<<31))
		if err != nil {
			panic(err) // static options
		}
		zstdDec = d
	})
	return zstdDec
}

// compress appends the compressed form of src to dst.
func compress(c Codec, dst, src []byte) []byte {
	switch c {
	case CodecS2:
		n := s2.MaxEncodedLen(len(src))
		if cap(dst)-len(dst) < n {
			nd := make([]byte, len(dst), len(dst)+n)
			copy(nd, dst)
			dst = nd
		}
		out := s2.Encode(dst[len(dst):len(dst)+n], src)
		return dst[:len(dst)+len(out)]
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, dst)
	}
	return append(dst, src...)
}

// decompress decodes src into a new buffer of exactly rawLen bytes.
func decompress(c Codec, src []byte, rawLen int) ([]byte, error) {
	switch c {
	case CodecS2:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if n != rawLen {
			return nil, fmt.Errorf("s2 length %d, header says %d", n, rawLen)
		}
		dst := make([]byte, rawLen)
		return s2.Decode(dst, src)
	case CodecZstd:
		dst := make([]byte, 0, rawLen)
		out, err := zstdDecoder().DecodeAll(src, dst)
		if err != nil {
			return nil, err
		}
		if len(out) != rawLen {
			return nil, fmt.Errorf("zstd length %d, header says %d", len(out), rawLen)
		}
		return out, nil
	case CodecNone:
		if len(src) != rawLen {
			return nil, fmt.Errorf("stored length %d, header says %d", len(src), rawLen)
		}
		return src, nil
	}
	return nil, fmt.Errorf("unknown codec %d", c)
}
