package group

import (
	"github.com/fastmq/fastmq/patterns/group/internal/wire"
	"github.com/fastmq/fastmq/patterns/pull"
)

// Register makes srv hand the group requests it receives to ext: a
// Server, or a host's wrapper of one that ends in Server.Handle. It also
// registers the group protocol's older versions, whose requests srv
// then answers with StatusUnsupported (in their own reply format, so an
// old member reports it) instead of taking them for pull requests. srv
// closes ext when it closes. It fails if srv is closed or a group
// version is taken already.
func Register(srv *pull.Server, ext pull.Extension) error {
	for v := wire.FirstVersion; v < wire.Version; v++ {
		if err := srv.HandleVersion(v, refuser{srv}); err != nil {
			return err
		}
	}
	return srv.HandleVersion(wire.Version, ext)
}

// refuser answers the requests of an older group protocol version.
type refuser struct{ srv *pull.Server }

func (r refuser) Handle(env [][]byte, frames [][]byte) {
	_ = r.srv.Send(env, wire.Unsupported(frames))
}

func (refuser) Close() error { return nil }
