package tail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// State file limits, enforced by the decoder before anything is trusted.
const (
	stateMagic        = "fastmq-tail-state"
	stateVersion      = 1
	maxStateBytes     = 16 << 20
	maxStatePaths     = 1 << 16
	maxFilesPerPath   = 64
	maxStateHeaderLen = 128
)

// filePos is the saved position in one file of a followed path.
type filePos struct {
	id    fileID
	off   int64
	fpLen int
	fpCRC uint32
}

// pathState is the saved state of one followed path: the files being read
// for it, oldest (rotated away, still draining) first and the file currently
// at the path last. No files means the path was followed but did not exist:
// when it appears, it is read from its beginning.
type pathState struct {
	path  string
	files []filePos
}

// JSON shapes of the state body.
type stateJSON struct {
	Paths []pathJSON `json:"paths"`
}

type pathJSON struct {
	Path  string     `json:"path"`
	Files []fileJSON `json:"files"`
}

type fileJSON struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
	FPLen  int    `json:"fp_len"`
	FPCRC  uint32 `json:"fp_crc"`
}

// encodeState renders the state file: a header line
// "fastmq-tail-state 1 <body length> <crc32c of body, 8 hex digits>\n"
// followed by a JSON body.
func encodeState(paths []pathState) []byte {
	var sj stateJSON
	sj.Paths = make([]pathJSON, len(paths))
	for i, p := range paths {
		pj := pathJSON{Path: p.path, Files: make([]fileJSON, len(p.files))}
		for j, f := range p.files {
			pj.Files[j] = fileJSON{Dev: f.id.dev, Ino: f.id.ino, Offset: f.off, FPLen: f.fpLen, FPCRC: f.fpCRC}
		}
		sj.Paths[i] = pj
	}
	body, err := json.Marshal(&sj)
	if err != nil {
		panic("tail: marshal state: " + err.Error()) // plain structs: cannot fail
	}
	body = append(body, '\n')
	return append([]byte(headerFor(body)), body...)
}

// headerFor returns the header line for a state body.
func headerFor(body []byte) string {
	return fmt.Sprintf("%s %d %d %08x\n", stateMagic, stateVersion, len(body), crc32.Checksum(body, crcTable))
}

// decodeState parses and validates a state file. Every failure wraps
// ErrCorruptState, except an unknown version which wraps ErrStateVersion.
func decodeState(data []byte) ([]pathState, error) {
	if len(data) > maxStateBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrCorruptState, len(data), maxStateBytes)
	}
	nl := bytes.IndexByte(data[:min(len(data), maxStateHeaderLen)], '\n')
	if nl < 0 {
		return nil, fmt.Errorf("%w: no header line", ErrCorruptState)
	}
	fields := bytes.Fields(data[:nl])
	if len(fields) != 4 || string(fields[0]) != stateMagic {
		return nil, fmt.Errorf("%w: bad header", ErrCorruptState)
	}
	ver, err := strconv.ParseUint(string(fields[1]), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: bad version field", ErrCorruptState)
	}
	if ver != stateVersion {
		return nil, fmt.Errorf("%w: version %d (this build reads %d)", ErrStateVersion, ver, stateVersion)
	}
	blen, err := strconv.ParseUint(string(fields[2]), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: bad length field", ErrCorruptState)
	}
	sum, err := strconv.ParseUint(string(fields[3]), 16, 32)
	if err != nil || len(fields[3]) != 8 {
		return nil, fmt.Errorf("%w: bad checksum field", ErrCorruptState)
	}
	body := data[nl+1:]
	if uint64(len(body)) != blen {
		return nil, fmt.Errorf("%w: body is %d bytes, header says %d", ErrCorruptState, len(body), blen)
	}
	if got := crc32.Checksum(body, crcTable); got != uint32(sum) {
		return nil, fmt.Errorf("%w: checksum mismatch (%08x, header says %08x)", ErrCorruptState, got, sum)
	}
	var sj stateJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sj); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrCorruptState, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: trailing data after body", ErrCorruptState)
	}
	if len(sj.Paths) > maxStatePaths {
		return nil, fmt.Errorf("%w: %d paths exceeds the limit of %d", ErrCorruptState, len(sj.Paths), maxStatePaths)
	}
	out := make([]pathState, 0, len(sj.Paths))
	seen := make(map[string]bool, len(sj.Paths))
	for i, pj := range sj.Paths {
		if pj.Path == "" || bytes.IndexByte([]byte(pj.Path), 0) >= 0 {
			return nil, fmt.Errorf("%w: path %d: empty or contains NUL", ErrCorruptState, i)
		}
		if seen[pj.Path] {
			return nil, fmt.Errorf("%w: path %q listed twice", ErrCorruptState, pj.Path)
		}
		seen[pj.Path] = true
		if len(pj.Files) > maxFilesPerPath {
			return nil, fmt.Errorf("%w: path %q: %d files exceeds the limit of %d", ErrCorruptState, pj.Path, len(pj.Files), maxFilesPerPath)
		}
		ps := pathState{path: pj.Path, files: make([]filePos, 0, len(pj.Files))}
		for _, fj := range pj.Files {
			if fj.Offset < 0 {
				return nil, fmt.Errorf("%w: path %q: negative offset %d", ErrCorruptState, pj.Path, fj.Offset)
			}
			if fj.FPLen < 0 || fj.FPLen > fingerprintMax {
				return nil, fmt.Errorf("%w: path %q: bad fingerprint length %d", ErrCorruptState, pj.Path, fj.FPLen)
			}
			ps.files = append(ps.files, filePos{id: fileID{dev: fj.Dev, ino: fj.Ino}, off: fj.Offset, fpLen: fj.FPLen, fpCRC: fj.FPCRC})
		}
		out = append(out, ps)
	}
	return out, nil
}

// writeFileAtomic replaces name with data crash-safely (temporary file,
// fsync, rename, directory fsync).
func writeFileAtomic(name string, data []byte) error {
	if err := fsutil.WriteFileAtomic(name, data, 0o644); err != nil {
		return fmt.Errorf("tail: save state: %w", err)
	}
	return nil
}
