package streams

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fastmq/fastmq/spool"
)

// A Set opens what is on disk, opens and advertises new streams once,
// refuses bad names, and after Close hands out nothing.
func TestSet(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) (*spool.Log, error) { return spool.Open(spool.Config{Dir: filepath.Join(dir, name)}) }
	l, err := open("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), spool.Record{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.Mkdir(filepath.Join(dir, ".not-a-stream"), 0o755); err != nil {
		t.Fatal(err)
	}
	var advertised [][]string
	s := New(Config{Dir: dir, Open: open, Advertise: func(names []string) error {
		advertised = append(advertised, slices.Clone(names))
		return nil
	}})
	if err := s.OpenDisk(); err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("on disk: %v", got)
	}
	if l, ok := s.Lookup("old"); !ok || l.NextOffset() != 1 {
		t.Fatalf("Lookup(old): %v", ok)
	}
	a, err := s.Get("new")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get("new"); err != nil || b != a {
		t.Fatalf("second Get: %v", err)
	}
	if len(advertised) != 1 || !slices.Equal(advertised[0], []string{"new", "old"}) {
		t.Fatalf("advertised %v", advertised)
	}
	if _, err := s.Get("../x"); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("new"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, ok := s.Lookup("old"); ok {
		t.Fatal("Lookup after Close found a stream")
	}
}
