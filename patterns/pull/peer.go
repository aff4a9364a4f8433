package pull

import "github.com/fastmq/fastmq/socket"

// PeerCredentials returns the credentials the handshake established for
// the client of the ROUTER envelope env (as the server hands it to its
// extensions), and whether that client is still connected: an
// extension binds what a client claims (a group member's id) to its
// connection and CURVE key with it. Safe for concurrent use.
func (s *Server) PeerCredentials(env [][]byte) (socket.PeerCredentials, bool) {
	if len(env) == 0 {
		return socket.PeerCredentials{}, false
	}
	cred, ok, err := s.sock.PeerCredentials(env[0])
	return cred, ok && err == nil
}
