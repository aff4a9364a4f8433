package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

func TestOffsetStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOffsets(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second store: %v", err)
	}
	if _, ok := s.Get("a", "x"); ok {
		t.Fatal("empty store has an offset")
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := uint64(1); j <= 20; j++ {
				if err := s.Commit("src", string(rune('a'+i)), j); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s.Commit("other", "x", 7)
	s.Close()
	s.Close()
	if err := s.Commit("a", "b", 1); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	// A temp file left by a crash mid-commit is ignored.
	os.WriteFile(filepath.Join(dir, offsetsFile+".tmp"), []byte("{garbage"), 0o644)
	s, err = OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := s.All()
	if len(all["src"]) != 4 || all["src"]["c"] != 20 || all["other"]["x"] != 7 {
		t.Fatalf("all = %v", all)
	}
	if v, ok := s.Get("other", "x"); !ok || v != 7 {
		t.Fatal(v, ok)
	}
}

// TestOffsetsFormat pins the offsets file format: a file written before
// versioning (testdata/golden/offsets-v0.json holds the bytes the previous
// code's json.Marshal wrote, with sources named like the envelope's keys)
// is still read, a commit rewrites it as a version 2 envelope, byte for byte
// the golden offsets-v2.json (rewritten with -update), and that file reads;
// so does a version 1 file (offsets-v1.json, next offsets alone).
func TestOffsetsFormat(t *testing.T) {
	want := map[string]map[string]uint64{
		"data": {"s": 2}, "other": {"x": 7}, "src": {"a": 20, "b": 3}, "version": {"s": 1},
	}
	old, err := os.ReadFile(filepath.Join("testdata", "golden", "offsets-v0.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, offsetsFile), old, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("old file read as %v, want %v", got, want)
	}
	if err := s.Commit("src", "a", 20); err != nil { // rewrites the file
		t.Fatal(err)
	}
	s.Close()
	got, err := os.ReadFile(filepath.Join(dir, offsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden", "offsets-v2.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, v1) {
		t.Fatalf("offsets file is\n%s\nwant (golden)\n%s", got, v1)
	}
	s, err = OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("version 2 file read as %v, want %v", got, want)
	}
	s.Close()
	v1, err = os.ReadFile(filepath.Join("testdata", "golden", "offsets-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, offsetsFile), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("version 1 file read as %v, want %v", got, want)
	}
	if p, ok := s.Position("src", "a"); !ok || p != (Position{Next: 20}) {
		t.Fatalf("version 1 position %+v %v, want next 20 with no identity", p, ok)
	}
}

// TestOffsetPositions checks that a position's log identity and epoch are
// kept across reopening, and that Commit stores a position with no identity.
func TestOffsetPositions(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := Position{Next: 1000, ID: uuid.New(), Epoch: 3}
	if err := s.CommitPosition("pub", "orders", p); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit("pub", "audit", 7); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok := s.Position("pub", "orders"); !ok || got != p {
		t.Fatalf("position %+v %v, want %+v", got, ok, p)
	}
	if got, ok := s.Position("pub", "audit"); !ok || got != (Position{Next: 7}) {
		t.Fatalf("position %+v %v", got, ok)
	}
	want := map[string]map[string]Position{"pub": {"orders": p, "audit": {Next: 7}}}
	if got := s.Positions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("positions %v, want %v", got, want)
	}
}

// TestOffsetsRefused checks that OpenOffsets refuses, with an error that
// says why and without keeping the lock, a file of a newer format version
// and a damaged file; and that fsutil's temporary files left by a crash are
// removed.
func TestOffsetsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       error
	}{
		{"newer version", `{"version":3,"data":{"src":{"a":1}}}`, ErrUnsupportedVersion},
		{"bad position", `{"version":2,"data":{"src":{"a":{"next":"x"}}}}`, ErrCorrupt},
		{"damaged", `{"src":{"a":`, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, offsetsFile), []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second time proves the first released the lock
				_, err := OpenOffsets(dir)
				if !errors.Is(err, tc.want) {
					t.Fatalf("OpenOffsets: %v, want %v", err, tc.want)
				}
				t.Log(err)
			}
		})
	}
	t.Run("temporary file", func(t *testing.T) {
		dir := t.TempDir()
		tmp := filepath.Join(dir, offsetsFile+".tmp-12345")
		if err := os.WriteFile(tmp, []byte("{garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenOffsets(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Fatalf("temporary file left: %v", err)
		}
		if len(s.All()) != 0 {
			t.Fatalf("offsets %v", s.All())
		}
	})
}

// TestOffsetsFileNull checks that an offsets file holding JSON null (or a
// versioned envelope whose data is null) is refused as damage, with the
// file named, instead of silently restarting every position from earliest;
// the store stays closed (its lock released).
func TestOffsetsFileNull(t *testing.T) {
	for _, body := range []string{"null", `{"version":2,"data":null}`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, offsetsFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenOffsets(dir)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), offsetsFile) {
			t.Fatalf("%s: err = %v, want ErrCorrupt naming the file", body, err)
		}
		os.Remove(filepath.Join(dir, offsetsFile))
		s, err := OpenOffsets(dir) // the lock was released
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
