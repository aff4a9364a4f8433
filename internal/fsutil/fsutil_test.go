package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "state")
	for _, data := range []string{"first", "second, longer than the first", ""} {
		if err := WriteFileAtomic(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestVersionedJSON(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "state.json")
	type state struct {
		Next uint64 `json:"next"`
	}
	if err := WriteVersionedJSON(name, 1, state{Next: 42}, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var got state
	v, err := DecodeVersionedJSON(b, 1, &got)
	if err != nil || v != 1 || got.Next != 42 {
		t.Fatalf("decode = %d, %+v, %v; want 1, {42}, nil", v, got, err)
	}

	// An old, unversioned file reads whole as version 0.
	got = state{}
	v, err = DecodeVersionedJSON([]byte(`{"next":7}`), 1, &got)
	if err != nil || v != 0 || got.Next != 7 {
		t.Fatalf("old file = %d, %+v, %v; want 0, {7}, nil", v, got, err)
	}
	// An old map with a key named "version" is not mistaken for an envelope.
	var m map[string]uint64
	v, err = DecodeVersionedJSON([]byte(`{"version":3,"other":4}`), 1, &m)
	if err != nil || v != 0 || m["version"] != 3 {
		t.Fatalf("old map = %d, %v, %v", v, m, err)
	}
	// A newer version is refused.
	if _, err := DecodeVersionedJSON([]byte(`{"version":2,"data":{}}`), 1, &got); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("newer version: err = %v, want ErrUnknownVersion", err)
	}
	// Garbage is an error.
	if _, err := DecodeVersionedJSON([]byte(`{"version":1,"data":`), 1, &got); err == nil {
		t.Fatal("truncated file decoded without error")
	}
}

func TestAllZero(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 64, 100} {
		b := make([]byte, n)
		if !AllZero(b) {
			t.Fatalf("%d zeros: not all zero", n)
		}
		for i := range b {
			b[i] = 1
			if AllZero(b) {
				t.Fatalf("%d bytes with byte %d set: all zero", n, i)
			}
			b[i] = 0
		}
	}
}
