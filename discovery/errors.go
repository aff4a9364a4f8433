package discovery

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrClosed is returned by every method called after Close or Leave.
	ErrClosed = errors.New("discovery: closed")
	// ErrJoin wraps the failure to contact any seed.
	ErrJoin = errors.New("discovery: join failed")
	// ErrWrongKey is joined to ErrJoin when the failure looks like an
	// encryption key mismatch (wrong key, or one side without a key). The
	// remote side cannot tell us why it dropped the connection, so this is a
	// diagnosis, not a proof.
	ErrWrongKey = errors.New("discovery: gossip encryption key mismatch")
	// ErrTagsTooLarge is matched by *TagsTooLargeError.
	ErrTagsTooLarge = errors.New("discovery: advertisement too large for gossip tags")
	// ErrInvalid is wrapped by validation errors on Config and advertisements.
	ErrInvalid = errors.New("discovery: invalid argument")
	// ErrNoEncryption is returned by key operations when the membership was
	// created without a key.
	ErrNoEncryption = errors.New("discovery: gossip encryption not enabled")
	// ErrNotGossiped is wrapped by the error of an advertisement change that
	// memberlist dropped every time it was given (see Advertise); the node
	// goes on gossiping its previous advertisement.
	ErrNotGossiped = errors.New("discovery: gossip did not take the advertisement")
)

// TagsTooLargeError reports an advertisement whose encoded tags exceed the
// per-member budget of gossip metadata. errors.Is(err, ErrTagsTooLarge) holds.
type TagsTooLargeError struct {
	Size  int // encoded size of all tags, in bytes
	Limit int // the budget, in bytes (512)
}

// Error reports the encoded size and the limit.
func (e *TagsTooLargeError) Error() string {
	return fmt.Sprintf("discovery: advertisement too large for gossip tags: %d bytes encoded, limit %d", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrTagsTooLarge) true.
func (e *TagsTooLargeError) Is(target error) bool { return target == ErrTagsTooLarge }

// KeyError reports a key-ring operation that some nodes failed or did not
// answer.
type KeyError struct {
	Op       string            // "install", "use", "remove" or "list"
	NumNodes int               // nodes known when the query was sent
	NumResp  int               // answers received
	NumErr   int               // answers reporting an error
	Messages map[string]string // node name -> error message
}

// Error summarises the answers and lists the failures.
func (e *KeyError) Error() string {
	return fmt.Sprintf("discovery: key %s: %d of %d nodes answered, %d failed: %v", e.Op, e.NumResp, e.NumNodes, e.NumErr, e.Messages)
}
