package spool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const dedupChildEnv = "FASTMQ_SPOOL_DEDUP_CHILD"

// dedupChild runs in a child process: one goroutine appends records of
// producer <name> with sequences 1, 2, ... and message ids <name>-<seq>,
// up to 64 in flight, and prints "ack <seq> <offset>" as each is
// acknowledged, until it is killed.
func dedupChild() {
	dir, name, _ := strings.Cut(os.Getenv(dedupChildEnv), ",")
	l, err := Open(Config{Dir: dir, SegmentBytes: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	ctx := context.Background()
	w := bufio.NewWriter(os.Stdout)
	type inflight struct {
		seq uint64
		a   *Ack
	}
	var q []inflight
	for seq := uint64(1); seq < 1_000_000; seq++ {
		a, err := l.AppendAsync(ctx, Record{Value: []byte(name), Headers: []Header{ProducerSeq(name, seq), MsgID(fmt.Sprint(name, "-", seq))}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(3)
		}
		q = append(q, inflight{seq, a})
		if len(q) == 64 || seq%7 == 0 {
			for _, f := range q {
				off, err := f.a.Wait(ctx)
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(3)
				}
				fmt.Fprintf(w, "ack %d %d\n", f.seq, off)
			}
			w.Flush()
			q = q[:0]
		}
	}
	os.Exit(0)
}

// TestDedupKill9: a writer killed with SIGKILL mid-stream loses no
// deduplication state: after recovery every record it stored (acknowledged
// or not) is a duplicate when sent again, by producer sequence and by
// message id, with the offset it is stored at; the producer continues
// exactly after its last stored sequence; a gap is refused.
func TestDedupKill9(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for round := 0; round < 4; round++ {
		name := fmt.Sprint("child", round)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), dedupChildEnv+"="+dir+","+name)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child did not start: %s", round, stderr.String())
		}
		acked := map[uint64]uint64{}
		killAfter := 50 + rand.IntN(2000)
		for len(acked) < killAfter && sc.Scan() {
			f := strings.Fields(sc.Text())
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			off, _ := strconv.ParseUint(f[2], 10, 64)
			acked[seq] = off
		}
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		if len(acked) < killAfter {
			t.Fatalf("round %d: child ended early: %s", round, stderr.String())
		}

		l, err := Open(Config{Dir: dir, SegmentBytes: 64 << 10})
		if err != nil {
			t.Fatalf("round %d: recovery: %v", round, err)
		}
		// What the log holds of this producer: sequences 1..m in order.
		stored := map[uint64]uint64{}
		var m uint64
		for _, r := range readAll(t, l, 0) {
			if string(r.Value) != name {
				continue
			}
			m++
			if got := string(r.Headers[0].Value); got != fmt.Sprint(name, ":", m) {
				t.Fatalf("round %d: offset %d holds %s, want sequence %d", round, r.Offset, got, m)
			}
			stored[m] = r.Offset
		}
		for seq, off := range acked {
			if stored[seq] != off {
				t.Fatalf("round %d: acknowledged sequence %d at %d, log has it at %d", round, seq, off, stored[seq])
			}
		}
		next := l.NextOffset()
		retries := make([]*Ack, 0, 2*m)
		for seq := uint64(1); seq <= m; seq++ {
			for _, r := range []Record{
				{Value: []byte(name), Headers: []Header{ProducerSeq(name, seq), MsgID(fmt.Sprint(name, "-", seq))}},
				{Value: []byte("id only"), Headers: []Header{MsgID(fmt.Sprint(name, "-", seq))}},
			} {
				a, err := l.AppendAsync(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				retries = append(retries, a)
			}
		}
		for i, a := range retries {
			_, err := a.Wait(ctx)
			dupOf(t, err, stored[uint64(i/2+1)])
		}
		_, err = l.Append(ctx, Record{Headers: []Header{ProducerSeq(name, m)}})
		dupOf(t, err, stored[m])
		var se *SequenceError
		if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq(name, m+2)}}); !errors.As(err, &se) || se.Last != m {
			t.Fatalf("round %d: gap after %d: %v", round, m, err)
		}
		if l.NextOffset() != next {
			t.Fatalf("round %d: retries appended %d records", round, l.NextOffset()-next)
		}
		if _, err := l.Append(ctx, Record{Headers: []Header{ProducerSeq(name, m+1)}}); err != nil {
			t.Fatalf("round %d: the next sequence %d: %v", round, m+1, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acknowledged, %d stored", round, len(acked), m)
	}
}
