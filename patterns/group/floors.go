package group

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/spool"
)

// Floors returns the floor of every group of stream this server knows, by
// group name: the groups it serves and those it keeps a state file for
// (a publisher that restarted knows its groups before their members come
// back). Every record below a group's floor is acknowledged or
// dead-lettered, and that is on disk: a served group's floor is the one
// of its last written group commit. It only reads: a group on disk is not
// loaded, and only its snapshot is read (see snapshotFloor); a state file
// that does not decode counts as floor 0.
func (s *Server) Floors(stream string) map[string]uint64 {
	out := make(map[string]uint64)
	s.mu.Lock()
	for _, g := range s.groups {
		if g.stream == stream {
			out[g.group] = g.durable
		}
	}
	s.mu.Unlock()
	ents, _ := os.ReadDir(filepath.Join(s.cfg.Dir, stream))
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".state")
		if !ok || e.IsDir() || !validName(name) {
			continue
		}
		if _, known := out[name]; known {
			continue
		}
		out[name] = snapshotFloor(s.cfg.Dir, stream, name, s.cfg.Lookup)
	}
	return out
}

// snapshotFloor returns the floor a group's snapshot holds: at or below
// its true floor (its journal only moves the floor on; a seek writes a
// snapshot), cut back to the end of the stream's epoch it was written in
// (see followEpoch). The journal is not read: Floors must not race the flusher
// that appends to it. A snapshot that does not read or decode gives 0,
// which keeps everything.
func snapshotFloor(dir, stream, group string, lookup func(string) (*spool.Log, bool)) uint64 {
	b, err := os.ReadFile(statePath(dir, stream, group))
	if err != nil {
		return 0
	}
	var f fileState
	if _, err := fsutil.DecodeVersionedJSON(b, stateVersion, &f); err != nil {
		return 0
	}
	if l, ok := lookup(stream); ok {
		return floorInEpoch(&f, l)
	}
	return f.Floor
}
