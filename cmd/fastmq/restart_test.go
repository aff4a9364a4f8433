package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool"
)

// TestCLIPublisherRestartServesAtOnce proves a `fastmq publish` process
// killed and restarted on the same ports answers the fetches of a running
// `fastmq consume` with records from its first one: its spool server, as
// its /status counts, never replies "unknown stream", even with 200 other
// streams on disk to open first.
func TestCLIPublisherRestartServesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "pub")
	for i := range 200 {
		l, err := spool.Open(spool.Config{Dir: filepath.Join(data, "streams", fmt.Sprintf("a%03d", i)), Sync: spool.SyncNone})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), spool.Record{Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	gossip, spoolEP, httpAddr := freePort(t), "tcp://"+freePort(t), freePort(t)
	publish := func() *cliProc {
		return startCLI(t, "publish", "--name", "pub", "--data", data, "--gossip", gossip, "--spool-bind", spoolEP,
			"--http", httpAddr, "--stream", "s", "--ack")
	}
	pub := publish()
	pub.feed("r0", "r1")
	for i := range 2 {
		if got := pub.line(); got != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q", i, got)
		}
	}
	cons := startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "s",
		"--name", "reader", "--count", "4")
	for i := range 2 {
		if got := cons.line(); got != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d: %q", i, got)
		}
	}
	pub.kill9()
	pub = publish()
	pub.feed("r2", "r3")
	for i := 2; i < 4; i++ {
		if got := cons.line(); got != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d after the restart: %q", i, got)
		}
	}
	resp, err := http.Get("http://" + httpAddr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st fastmq.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Server.UnknownStreams != 0 {
		t.Fatalf("the restarted publisher answered %d fetches with unknown stream\n%s", st.Server.UnknownStreams, cons.stderr())
	}
	cons.mustSucceed()
}
