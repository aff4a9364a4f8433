package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/spool"
)

// TestRecordJSONShape checks the one --json record shape: UTF-8 values as
// strings, anything else as base64 marked with its encoding, headers in
// order, time in UTC.
func TestRecordJSONShape(t *testing.T) {
	id := uuid.MustParse("01234567-89ab-cdef-0123-456789abcdef")
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	cases := []struct {
		name      string
		pub, strm string
		headers   []spool.Header
		value     []byte
		want      string
	}{
		{"plain", "", "", nil, []byte("héllo <b>"),
			`{"offset":7,"id":"01234567-89ab-cdef-0123-456789abcdef","time":"2026-01-02T02:04:05.0000006Z","value":"héllo <b>"}`},
		{"binary and headers", "", "", []spool.Header{{Key: "source", Value: []byte("a.log")}, {Key: "raw", Value: []byte{0xff}}, {Key: "source", Value: nil}}, []byte{0, 0xfe},
			`{"offset":7,"id":"01234567-89ab-cdef-0123-456789abcdef","time":"2026-01-02T02:04:05.0000006Z","headers":[{"key":"source","value":"a.log"},{"key":"raw","value":"/w==","encoding":"base64"},{"key":"source","value":""}],"value":"AP4=","encoding":"base64"}`},
		{"publisher and stream", "p1", "logs", nil, nil,
			`{"publisher":"p1","stream":"logs","offset":7,"id":"01234567-89ab-cdef-0123-456789abcdef","time":"2026-01-02T02:04:05.0000006Z","value":""}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := newRecordEncoder(&b).encode(tc.pub, tc.strm, 7, id, at, tc.headers, tc.value); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(b.String(), "\n"); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

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
		var jr jsonRecord
		if err := json.Unmarshal([]byte(read[i]), &jr); err != nil || jr.Offset != uint64(i) {
			t.Fatalf("record %d: %s does not decode as offset %d: %v", i, read[i], i, err)
		}
	}
	if !strings.Contains(read[1], `"value":"/wB4","encoding":"base64"`) {
		t.Fatalf("binary value not base64: %s", read[1])
	}
}
