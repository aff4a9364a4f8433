package spool

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
