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
	"sync"
	"testing"
)

const crashChildEnv = "FASTMQ_SPOOL_CRASH_CHILD"

// crashChild runs in a child process (the test binary re-executed): it
// appends from 4 goroutines and prints "ack <first> <count> <tag>" after each
// Append returns, until it is killed.
func crashChild() {
	parts := strings.Split(os.Getenv(crashChildEnv), ",")
	sync_, _ := ParseSyncPolicy(parts[1])
	codec, _ := ParseCodec(parts[2])
	l, err := Open(Config{Dir: parts[0], Sync: sync_, Codec: codec, SegmentBytes: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < 1_000_000; seq++ {
				tag := fmt.Sprintf("p%d-g%d-%d", os.Getpid(), g, seq)
				recs := make([]Record, seq%3+1)
				for j := range recs {
					recs[j].Value = fmt.Appendf(nil, "%s-%d", tag, j)
				}
				first, err := l.Append(context.Background(), recs...)
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(3)
				}
				mu.Lock()
				os.Stdout.WriteString(fmt.Sprintf("ack %d %d %s\n", first, len(recs), tag))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

type ack struct {
	first uint64
	n     int
	tag   string
}

func TestCrashKill9(t *testing.T) {
	rounds := 10
	if os.Getenv("FASTMQ_LONG") != "" {
		rounds = 60
	}
	dir := t.TempDir()
	var acks []ack
	policies := []string{"each", "group", "none"}
	codecs := []string{"none", "s2", "zstd"}
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir+","+policies[round%3]+","+codecs[round/3%3])
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
		if round == 0 {
			// A second writer, in another process, is refused with a clear error.
			_, err := Open(Config{Dir: dir})
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
				t.Errorf("second writer: %v", err)
			}
		}
		killAfter := 5 + rand.IntN(300)
		n := 0
		parse := func(line string) {
			var a ack
			if _, err := fmt.Sscanf(line, "ack %d %d %s", &a.first, &a.n, &a.tag); err != nil {
				t.Fatalf("bad line %q", line)
			}
			acks = append(acks, a)
		}
		for n < killAfter && sc.Scan() {
			parse(sc.Text())
			n++
		}
		cmd.Process.Kill() // SIGKILL
		for sc.Scan() {    // acknowledged before the kill, still in the pipe
			parse(sc.Text())
		}
		cmd.Wait()
		if n < killAfter {
			t.Fatalf("round %d: child ended early: %s", round, stderr.String())
		}

		l, err := Open(Config{Dir: dir, SegmentBytes: 64 << 10})
		if err != nil {
			t.Fatalf("round %d: recovery: %v", round, err)
		}
		// The killed writer left the log open: a new epoch, and no loss
		// below the checkpoint (it never runs ahead of the data).
		if r := l.Recovery(); !r.Unclean || !r.NewEpoch || r.Lost() != 0 || r.EpochStart != l.NextOffset() {
			t.Fatalf("round %d: recovery report %+v, next %d", round, r, l.NextOffset())
		}
		byOffset := map[uint64]string{}
		seen := map[string]uint64{}
		for _, r := range readAll(t, l, 0) {
			v := string(r.Value)
			if prev, dup := seen[v]; dup {
				t.Fatalf("round %d: %q at offsets %d and %d", round, v, prev, r.Offset)
			}
			seen[v] = r.Offset
			byOffset[r.Offset] = v
		}
		for _, a := range acks {
			for j := 0; j < a.n; j++ {
				want := fmt.Sprintf("%s-%d", a.tag, j)
				if got := byOffset[a.first+uint64(j)]; got != want {
					t.Fatalf("round %d: acknowledged offset %d holds %q, want %q", round, a.first+uint64(j), got, want)
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d (%s): %d acks so far, %d records", round, policies[round%3], len(acks), len(byOffset))
	}
	if rep, err := Verify(dir); err != nil || !rep.Clean() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
