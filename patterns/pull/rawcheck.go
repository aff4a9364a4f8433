package pull

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The fields of a stored batch header that a server checks before it sends
// a batch, as package spool's format spec (version 1) lays them out: all
// little-endian, the CRC-32C at byte 4 covering bytes 8 up to the batch's
// length.
const (
	rawHeaderLen = 48
	rawLenAt     = 0
	rawCRCAt     = 4
	rawCountAt   = 12
	rawBaseAt    = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// gapError says that the records from one offset up to another do not
// exist in the log: the first stored batch after from starts at next.
type gapError struct{ from, next uint64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("records from %d to %d do not exist in the log (removed by repair)", e.from, e.next-1)
}

// checkRaw checks the stored batches that spool.Log.ReadRaw returned for a
// fetch at from: each batch's length, checksum and offsets. The data is
// not decompressed. It returns the valid, contiguous batches at the start
// of data and the offset after them; a damaged batch and everything after
// it are left out. When the very first batch is damaged, the error says
// why, with the requested offset. When the first batch is valid but starts
// above from, the error is a *gapError and the data returned is the valid
// batches from the gap's end on.
func checkRaw(data []byte, from uint64) ([]byte, uint64, error) {
	pos, next := 0, from
	var why string
	for pos < len(data) {
		b := data[pos:]
		if len(b) < rawHeaderLen {
			why = fmt.Sprintf("truncated batch header (%d bytes)", len(b))
			break
		}
		n := binary.LittleEndian.Uint32(b[rawLenAt:])
		if n < rawHeaderLen || uint64(n) > uint64(len(b)) {
			why = fmt.Sprintf("batch length %d with %d bytes left", n, len(b))
			break
		}
		if crc32.Checksum(b[8:n], castagnoli) != binary.LittleEndian.Uint32(b[rawCRCAt:]) {
			why = "batch checksum mismatch"
			break
		}
		count := binary.LittleEndian.Uint32(b[rawCountAt:])
		base := binary.LittleEndian.Uint64(b[rawBaseAt:])
		if count == 0 {
			why = "batch of no records"
			break
		}
		if pos == 0 && base+uint64(count) <= from {
			why = fmt.Sprintf("first batch holds offsets %d..%d, before the requested one", base, base+uint64(count)-1)
			break
		}
		if pos > 0 && base != next {
			why = fmt.Sprintf("batch base offset %d, expected %d", base, next)
			break
		}
		next = base + uint64(count)
		pos += int(n)
	}
	if pos == 0 {
		return nil, from, fmt.Errorf("stored batch holding offset %d is damaged: %s", from, why)
	}
	if first := binary.LittleEndian.Uint64(data[rawBaseAt:]); first > from {
		return data[:pos], next, &gapError{from: from, next: first}
	}
	return data[:pos], next, nil
}
