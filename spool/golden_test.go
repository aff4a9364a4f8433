package spool

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenSegment builds a version 1 segment (base 7) holding the seed records
// in one batch per codec.
func goldenSegment(c Codec) []byte {
	var h [segHeaderLen]byte
	encodeSegHeader(h[:], 7, 1700000000000000000)
	b := append([]byte(nil), h[:]...)
	recs := seedRecords()
	b = append(b, seedBatch(c, recs, 7)...)
	return append(b, seedBatch(c, recs[:1], 10)...)
}

// TestGoldenFormat pins the on-disk format: files written by this version
// (and kept in testdata) must stay readable, and uncompressed batches must
// encode to exactly the same bytes. Run with -update after a deliberate
// format change (and bump the format version).
func TestGoldenFormat(t *testing.T) {
	for _, c := range []Codec{CodecNone, CodecS2, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			path := filepath.Join("testdata", "golden", "v1-"+c.String()+segSuffix)
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, goldenSegment(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if c == CodecNone && !bytes.Equal(goldenSegment(c), want) {
				t.Fatal("encoding differs from the golden file: the format changed")
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, segName(7)), want, 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := OpenReadOnly(Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			got := readAll(t, l, 7)
			seeds := append(seedRecords(), seedRecords()[0])
			if len(got) != len(seeds) {
				t.Fatalf("%d records", len(got))
			}
			for i, r := range got {
				if r.Offset != uint64(7+i) {
					t.Fatalf("offset %d at %d", r.Offset, i)
				}
				if len(seeds[i].Headers) == 0 {
					seeds[i].Headers = nil
				}
				if err := sameRecord(r, seeds[i]); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
