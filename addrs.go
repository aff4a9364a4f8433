package fastmq

import "github.com/fastmq/fastmq/internal/netaddr"

// resolveNetwork fills in the gossip address and the spool endpoints cfg
// left empty (see netaddr.Resolve): with a seed on another host, gossip
// binds the local address that routes to it, never loopback, and the
// spool server binds the gossip host; loopback addresses a remote mesh
// could not reach are refused.
func resolveNetwork(cfg *Config) error {
	a, err := netaddr.Resolve(netaddr.Addrs{Gossip: cfg.GossipAddr, Advertise: cfg.AdvertiseAddr, Seeds: cfg.Seeds,
		SpoolEndpoints: cfg.SpoolEndpoints, SpoolAdvertise: cfg.SpoolAdvertise})
	if err != nil {
		return err
	}
	cfg.GossipAddr, cfg.SpoolEndpoints = a.Gossip, a.SpoolEndpoints
	return nil
}
