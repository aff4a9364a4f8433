// Package fsutil holds the crash-safe file operations that FastMQ's
// on-disk state (spool offsets, tailer positions, collector positions)
// shares.
package fsutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces name with data crash-safely: it writes a
// temporary file in the same directory, fsyncs it, renames it over name and
// fsyncs the directory. After a crash, name holds either the old or the new
// data, never a mix; the old file is never removed before the new one is in
// place.
func WriteFileAtomic(name string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("chmod temporary file for %s: %w", name, err)
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write temporary file for %s: %w", name, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("fsync temporary file for %s: %w", name, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close temporary file for %s: %w", name, err)
	}
	if err = os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("rename %s into place: %w", name, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that creates, renames and deletes in it
// are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s for fsync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// WriteVersionedJSON writes v crash-safely (as WriteFileAtomic) as the JSON
// object {"version": version, "data": v}. Every small state file FastMQ keeps
// (consumer offsets, collector positions, group state) goes through it, so a
// later format can tell old files from new ones.
func WriteVersionedJSON(name string, version int, v any, perm os.FileMode) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	b, err := json.Marshal(struct {
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data"`
	}{version, data})
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return WriteFileAtomic(name, append(b, '\n'), perm)
}

// DecodeVersionedJSON decodes b, written by WriteVersionedJSON, into v and
// returns its format version. A file from before versioning (any JSON value
// that is not such an envelope) decodes whole into v as version 0, so old
// files stay readable. A version above max is refused with
// ErrUnknownVersion, before v is touched.
func DecodeVersionedJSON(b []byte, max int, v any) (int, error) {
	// An envelope is an object with exactly the keys "version" and "data"
	// (an old unversioned map that happened to hold a key named "version"
	// is not one).
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil && len(m) == 2 && m["version"] != nil && m["data"] != nil {
		var version int
		if err := json.Unmarshal(m["version"], &version); err == nil {
			if version < 1 || version > max {
				return version, fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrUnknownVersion, version, max)
			}
			return version, json.Unmarshal(m["data"], v)
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return 0, err
	}
	return 0, nil
}

// ErrUnknownVersion reports a state file written by a newer format than
// this build reads.
var ErrUnknownVersion = errors.New("fsutil: unknown state file version")

// AllZero reports whether b holds only zero bytes: the state of space a
// file was extended or preallocated with and nothing was written to.
func AllZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
