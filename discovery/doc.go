// Package discovery is FastMQ's gossip membership: nodes find each other
// without a broker or registry, advertise the sockets and spool streams they
// offer, and watch the names they need. It runs hashicorp/serf (over
// memberlist) behind a small API; no serf type appears in it.
//
// # Model
//
// A Membership is one node. New starts gossip on Config.BindAddr and joins
// Config.Seeds. A node advertises services (a name, a socket kind and
// endpoints, e.g. "jobs", "PULL", "tcp://10.0.0.5:5557") and at most one
// spool server (an endpoint and the stream names it serves). Every node sees
// every advertisement: Lookup and LookupStream return the live instances,
// Watch and WatchStream stream their changes (Added, Updated, Removed with
// ReasonFailed, ReasonLeft or ReasonWithdrawn). The local node's own
// advertisements are included, so a node can consume its own services.
// Each watch runs a Feed, the one mapping from instance states to events;
// other implementations of Interface (the in-memory fake in package
// discoverytest) run Feeds too, so their watches behave the same.
//
// Failure detection is memberlist's SWIM: a node that stops answering probes
// is suspected, then declared failed, and its instances are removed with
// ReasonFailed. Leave broadcasts a graceful departure first, so others see
// ReasonLeft. Close does not: to the cluster a closed node has failed.
//
// # Restart
//
// A node restarted under the same name rejoins with a new incarnation. On the
// same address it refutes its old "dead" entry at once. On a new address
// (port 0) the cluster accepts the new address once the old incarnation has
// been dead for memberlist's DeadNodeReclaimTime (500 ms in ProfileLocal,
// 30 s in ProfileLAN); until then the new incarnation is ignored as a name
// conflict. serf's automatic conflict resolution is disabled, because it would
// make the restarted node, being the minority, shut itself down.
//
// While the cluster still suspects its old incarnation, a restarted node
// refutes accusations; memberlist drops a tag update that races a
// refutation (it draws the update's incarnation before taking its lock).
// Advertise, Withdraw and AdvertiseSpool check that memberlist gossips the
// new tags and give them again if it does not, so a stream opened just
// after a restart is not left out of the node's advertisement.
//
// # Identity and duplicate names
//
// Every node gossips an identity (Config.Identity: a short string that
// stays the same across restarts of one node, kept in its data directory
// with LoadIdentity; by default a new random one per New). Members and
// Instance report it, so a consumer can tell that another process took a
// publisher's name. A name belongs to one live node: while joining, New
// watches the alive messages gossip brings for its own name; for each
// other address that claims it with another identity, it pings that
// address under the name (up to five probe timeouts), and if the holder
// answers, New fails with a *NameTakenError (ErrNameTaken) naming the
// holder's address, and stops gossip. A claim that does not answer is a
// dead incarnation and is not refused; one with this node's own identity
// is this node's previous incarnation, which it takes over as under
// Restart. With RetryJoin the check runs after the background join: a
// refused node logs it at Error, stops gossiping, and Err reports it.
// (The other members never take the second claim anyway: memberlist
// keeps a live member's address and ignores the conflicting one.)
//
// # Tag encoding
//
// serf gossips at most 512 bytes of tags per member, counted as serf encodes
// them: one magic byte and a msgpack map of strings. Our advertisement uses
// reserved keys starting with "~"; other keys are user tags (Config.Tags):
//
//	"~s" + name  ->  kind "|" endpoint ("," endpoint)*     a service
//	"~q"         ->  endpoint "|" [stream ("," stream)*]    the spool server
//	"~i"         ->  identity                               the node's identity
//	"~c"         ->  40 Z85 characters                      the node's CURVE public key
//
// Endpoints are compacted: "tcp://" is dropped, and the host is dropped too
// when it equals the node's gossip host, so "tcp://10.0.0.5:5557" on node
// 10.0.0.5 is written ":5557". Other schemes ("ipc://", "inproc://") are kept
// verbatim. Names, kinds, endpoints and streams must be non-empty and contain
// no space, control character, "|" or ",". Malformed or unknown reserved tags
// from peers are ignored. An advertisement that does not fit fails with a
// *TagsTooLargeError (errors.Is ErrTagsTooLarge) and changes nothing.
//
// # Encryption
//
// With Config.Key every gossip packet and stream is AES-GCM encrypted and
// unencrypted traffic is refused. A node with a different key, or none,
// cannot join: Join fails with ErrJoin (and ErrWrongKey when memberlist's
// error shows the mismatch; a remote that cannot decrypt just drops the
// connection, which we can only report as a failed join). Keys rotate
// cluster-wide with InstallKey, UseKey and RemoveKey; ListKeys shows which
// keys members hold.
//
// # Asking members
//
// A node learns of members that left or failed only while it is in the
// cluster: one that joined later never lists them. AskMembers asks the
// others over gossip, with a serf query named "fastmq-members" that every
// Membership answers (its event consumer replies with one datagram) with
// the members it knows to be leaving, left or failed: name, gossip
// address, status and gossip tags. An answer stays within serf's query
// response limit (1 KiB, framing included), so a responder lists as many
// members as fit, sorted by name, and says whether more follow; the asker
// asks each such responder again, by name, for the members after the last
// it got. A member whose tags alone do not fit an answer is listed without
// them, and the report says so (MembersReport.Stripped), as it names the
// responders whose later pages did not arrive (Incomplete). The wire format
// is in askwire.go.
//
// # Goroutines
//
// Close waits for every goroutine the Membership starts (the event consumer,
// watchers, background joins, key queries) and for serf's and memberlist's
// own. serf's Shutdown stops the network listeners and only signals the rest
// (probe, gossip and push/pull schedulers, packet and stream handlers, the
// reaper, reconnector and queue monitors), so Close then polls the goroutine
// dump until no goroutine runs a method of this node's serf or memberlist
// instance, bounded by 8 probe intervals plus the TCP timeout plus 1 s. Short
// timer callbacks that do not show those receivers (a pending nack, a
// suspicion timeout) are not tracked; they end within a probe timeout.
package discovery
