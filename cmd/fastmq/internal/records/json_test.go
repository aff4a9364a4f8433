package records

import (
	"bytes"
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
			if err := NewEncoder(&b).Encode(tc.pub, tc.strm, 7, id, at, tc.headers, tc.value); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(b.String(), "\n"); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
