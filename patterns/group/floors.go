package group

import (
	"os"
	"path/filepath"
	"strings"
)

// Floors returns the floor of every group of stream this server knows, by
// group name: the groups it serves and those it keeps a state file for
// (a publisher that restarted knows its groups before their members come
// back). Every record below a group's floor is acknowledged or
// dead-lettered. It only reads: a group on disk is not loaded. A state
// file that does not decode is left out (the group reports it when it is
// served).
func (s *Server) Floors(stream string) map[string]uint64 {
	out := make(map[string]uint64)
	s.mu.Lock()
	for _, g := range s.groups {
		if g.stream == stream {
			out[g.group] = g.floor
		}
	}
	s.mu.Unlock()
	ents, _ := os.ReadDir(filepath.Join(s.cfg.Dir, stream))
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".state")
		if !ok || e.IsDir() || !nameRE.MatchString(name) {
			continue
		}
		if _, known := out[name]; known {
			continue
		}
		if g, _, err := loadState(s.cfg.Dir, stream, name); err == nil && g != nil {
			out[name] = g.floor
		}
	}
	return out
}
