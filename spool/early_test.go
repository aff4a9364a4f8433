package spool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// syncGate holds the syncer before the group fsync that follows holdNext:
// the test learns the syncer is there from entered and lets it go with
// release.
type syncGate struct {
	mu      sync.Mutex
	hold    bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// newSyncGate installs the gate; a failed test's cleanup opens it before
// the Log's Close waits for the syncer.
func newSyncGate(t *testing.T, l *Log) *syncGate {
	g := &syncGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(g.open)
	l.beforeSync = func() {
		g.mu.Lock()
		hold := g.hold
		g.hold = false
		g.mu.Unlock()
		if hold {
			g.entered <- struct{}{}
			<-g.release
		}
	}
	return g
}

// holdNext makes the next group fsync wait for open.
func (g *syncGate) holdNext() {
	g.mu.Lock()
	g.hold = true
	g.mu.Unlock()
}

func (g *syncGate) open() { g.once.Do(func() { close(g.release) }) }

func appendAsyncValues(t *testing.T, l *Log, prefix string, n int) []*Ack {
	t.Helper()
	var acks []*Ack
	for i := 0; i < n; i += 10 {
		recs := make([]Record, min(10, n-i))
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "%s-%d", prefix, i+j)
		}
		a, err := l.AppendAsync(context.Background(), recs...)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	return acks
}

// TestVisibleBeforeSync: with the option, records a held fsync has not
// made durable are readable, their Append has not returned, and the
// recovery checkpoint stays at what was fsynced; without it, nothing of
// the held group is readable.
func TestVisibleBeforeSync(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Config{Dir: dir, Sync: SyncEach, VisibleBeforeSync: early})
			g := newSyncGate(t, l)
			appendValues(t, l, "a", 100)
			g.holdNext()
			acks := appendAsyncValues(t, l, "b", 10)
			<-g.entered // the syncer holds the group before its fsync
			if early {
				testutil.WaitFor(t, "records visible before their fsync", 0, func() bool { return l.NextOffset() == 110 })
				recs := readAll(t, l, 100)
				if len(recs) != 10 || string(recs[9].Value) != "b-9" {
					t.Fatalf("read %d records before the fsync", len(recs))
				}
			} else if n := l.NextOffset(); n != 100 {
				t.Fatalf("NextOffset %d before the fsync without the option", n)
			}
			select {
			case <-acks[0].Done():
				t.Fatal("append acknowledged before its fsync")
			default:
			}
			if err := l.checkpoint(false); err != nil {
				t.Fatal(err)
			}
			if m := readMetaT(t, dir); m.Acked != 100 {
				t.Fatalf("checkpoint at %d while only 100 records were fsynced", m.Acked)
			}
			g.open()
			for _, a := range acks {
				if _, err := a.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if n := l.NextOffset(); n != 110 {
				t.Fatalf("NextOffset %d after the fsync", n)
			}
			testutil.WaitFor(t, "checkpoint at 110", 0, func() bool {
				m, ok, err := readMeta(dir)
				return err == nil && ok && m.Acked == 110
			})
		})
	}
}

// TestVisibleBeforeSyncCrash: a consumer reads records the writer
// published before their fsync. A process crash (the files as the OS
// holds them) loses none; a machine crash whose disk lost them is found
// as an unclean close with no acknowledged record lost, a new epoch starts
// at the surviving end, and the consumer learns that what it read there is
// gone instead of taking the new records at those offsets for it.
func TestVisibleBeforeSyncCrash(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Config{Dir: dir, Sync: SyncEach, VisibleBeforeSync: true})
	g := newSyncGate(t, l)
	appendValues(t, l, "old", 1000)
	testutil.WaitFor(t, "checkpoint at 1000", 0, func() bool {
		m, ok, err := readMeta(dir)
		return err == nil && ok && m.Acked == 1000
	})
	g.holdNext()
	acks := appendAsyncValues(t, l, "early", 50)
	<-g.entered
	testutil.WaitFor(t, "50 records visible before their fsync", 0, func() bool { return l.NextOffset() == 1050 })
	var c consumer
	c.resume(t, l)
	if c.next != 1050 || c.got[1049] != "early-49" {
		t.Fatalf("consumer at %d", c.next)
	}
	if err := l.checkpoint(false); err != nil { // as the checkpointer could any moment
		t.Fatal(err)
	}
	killed, powered := crashImages(t, dir, 100)
	g.open()
	for _, a := range acks {
		<-a.Done()
	}

	lk := openT(t, Config{Dir: killed, VisibleBeforeSync: true})
	if r := lk.Recovery(); r.Lost() != 0 || lk.NextOffset() != 1050 {
		t.Fatalf("after a process crash: %+v, next %d", r, lk.NextOffset())
	}
	ck := c
	ck.got = append([]string(nil), c.got...)
	appendValues(t, lk, "new", 20)
	ck.resume(t, lk)
	if len(ck.lost) != 0 || len(ck.got) != 1070 || ck.got[1050] != "new-0" {
		t.Fatalf("after a process crash the consumer lost %v, received %d records", ck.lost, len(ck.got))
	}

	logger, logs := captureLogger()
	l2 := openT(t, Config{Dir: powered, Logger: logger, VisibleBeforeSync: true})
	r := l2.Recovery()
	if !r.Unclean || !r.NewEpoch || r.Lost() != 0 || r.EpochStart != 1000 {
		t.Fatalf("recovery report: %+v", r)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("an acknowledged record reported lost:\n%s", logs)
	}
	appendValues(t, l2, "new", 20)
	c.resume(t, l2)
	if len(c.lost) != 1 || c.lost[0] != [2]uint64{1000, 1050} || len(c.got) != 1070 || c.got[1050] != "new-0" {
		t.Fatalf("consumer lost %v, received %d records", c.lost, len(c.got))
	}
}

// crashImages copies the one-segment log in dir (its meta.json as it is
// now) twice, as a crash would leave it: killed as after kill -9 (the page
// cache, and so every written record, survives), powered as after a power
// loss that took everything from batch lostBatch on (never fsynced).
func crashImages(t *testing.T, dir string, lostBatch int) (killed, powered string) {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(dir, metaFileName))
	if err != nil {
		t.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(dir, segName(0)))
	if err != nil {
		t.Fatal(err)
	}
	image := func(data []byte) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, segName(0)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, metaFileName), mb, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	bs := batchesOf(t, seg)
	lostSeg := append([]byte(nil), seg...)
	clear(lostSeg[bs[lostBatch].pos:])
	return image(seg), image(lostSeg)
}
