package group

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/fastmq/fastmq/patterns/group/internal/durable"
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
		if g.Stream == stream {
			out[g.Group] = g.Durable
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
		out[name] = durable.SnapshotFloor(s.cfg.Dir, stream, name, s.cfg.Lookup)
	}
	return out
}
