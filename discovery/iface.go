package discovery

import "context"

// Interface is the part of *Membership that services use to advertise and
// find each other. Code that only needs these calls can accept an Interface
// and be tested with the in-memory fake in package discoverytest.
type Interface interface {
	Name() string
	Advertise(s Service) error
	Withdraw(name string) error
	AdvertiseSpool(endpoint string, streams []string) error
	Lookup(name string) []Instance
	LookupStream(stream string) []Instance
	Watch(ctx context.Context, name string) (<-chan Event, error)
	WatchStream(ctx context.Context, stream string) (<-chan Event, error)
	Members() []Member
}

var _ Interface = (*Membership)(nil)
