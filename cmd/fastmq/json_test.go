package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
	"github.com/fastmq/fastmq/spool"
)

// TestCLIConsumeAndSpoolReadPrintOneShape checks that `consume --json` and
// `spool read --json` print the identical line for the same record
// (consume with "publisher" and "stream" in front).
func TestCLIConsumeAndSpoolReadPrintOneShape(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	streamDir := filepath.Join(dir, "pub", "streams", "events")
	l, err := spool.Open(spool.Config{Dir: streamDir})
	if err != nil {
		t.Fatal(err)
	}
	recs := []spool.Record{
		{Value: []byte("plain text")},
		{Value: []byte{0xff, 0x00, 'x'}, Headers: []spool.Header{{Key: "source", Value: []byte("/var/log/a.log")}, {Key: "pos", Value: []byte("1:2:3")}}},
		{Value: []byte(`quote " and <tag>`), Headers: []spool.Header{{Key: "bin", Value: []byte{0xc3}}}},
	}
	if _, err := l.Append(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	gossip := freePort(t)
	agent := startCLI(t, "agent", "--name", "pub-1", "--data", filepath.Join(dir, "pub"), "--gossip", gossip)
	agent.line()
	consumed := startCLI(t, "consume", "--data", filepath.Join(dir, "cons"), "--join", gossip, "--stream", "events",
		"--name", "reader", "--count", "3", "--json").mustSucceed()
	read := startCLI(t, "spool", "read", "--dir", streamDir, "--json").mustSucceed()
	if len(consumed) != 3 || len(read) != 3 {
		t.Fatalf("consume printed %q\nspool read printed %q", consumed, read)
	}
	for i := range read {
		rest, ok := strings.CutPrefix(consumed[i], `{"publisher":"pub-1","stream":"events",`)
		if !ok || "{"+rest != read[i] {
			t.Fatalf("record %d:\nconsume    %s\nspool read %s", i, consumed[i], read[i])
		}
		var jr records.JSONRecord
		if err := json.Unmarshal([]byte(read[i]), &jr); err != nil || jr.Offset != uint64(i) {
			t.Fatalf("record %d: %s does not decode as offset %d: %v", i, read[i], i, err)
		}
	}
	if !strings.Contains(read[1], `"value":"/wB4","encoding":"base64"`) {
		t.Fatalf("binary value not base64: %s", read[1])
	}
}
