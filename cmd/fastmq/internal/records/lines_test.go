package records

import (
	"bytes"
	"strings"
	"testing"
)

// chunks records each Write's bytes.
type chunks struct{ got [][]byte }

func (c *chunks) Write(p []byte) (int, error) {
	c.got = append(c.got, append([]byte(nil), p...))
	return len(p), nil
}

// TestLineWriterWritesWholeLines checks that every write ends at a line's
// end and is at most 4 KiB unless one line alone is longer, and that
// nothing is lost or reordered.
func TestLineWriterWritesWholeLines(t *testing.T) {
	var want bytes.Buffer
	c := &chunks{}
	lw := NewLineWriter(c)
	for i := 0; i < 3000; i++ {
		line := strings.Repeat("x", (i*37)%300) + "\n"
		if i == 1500 {
			line = strings.Repeat("y", 10000) + "\n"
		}
		lw.Write([]byte(line))
		want.WriteString(line)
		if i%700 == 0 {
			if err := lw.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := lw.Flush(); err != nil {
		t.Fatal(err)
	}
	if lw.Buffered() != 0 {
		t.Fatalf("%d bytes left after Flush", lw.Buffered())
	}
	var got bytes.Buffer
	for i, ch := range c.got {
		if ch[len(ch)-1] != '\n' {
			t.Fatalf("write %d ends inside a line", i)
		}
		if len(ch) > pipeAtomic && bytes.Count(ch, []byte("\n")) != 1 {
			t.Fatalf("write %d is %d bytes of several lines", i, len(ch))
		}
		got.Write(ch)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("the lines written differ from the lines given")
	}
}
