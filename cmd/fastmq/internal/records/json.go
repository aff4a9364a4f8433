package records

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/fastmq/fastmq/spool"
)

// JSONHelp describes the --json record shape, for the commands' help.
const JSONHelp = `With --json, each record is one JSON object on its own line:
  {"offset":N,"id":"UUID","time":"RFC3339Nano, UTC","headers":[{"key":K,"value":V},...],"value":V}
"headers" is omitted when there are none and keeps their order (a key may repeat);
"id" is omitted where the record's id is not known (dlq ls).
A value (of the record or of a header) that is valid UTF-8 is the JSON string
itself; any other value is base64 (standard, padded), marked by
"encoding":"base64" beside it.`

// JSONHeader is one header of a JSONRecord; Encoding is "base64" when
// Value is the base64 of a value that is not valid UTF-8.
type JSONHeader struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding,omitempty"`
}

// JSONRecord is the one JSON shape of a record, for every --json that
// prints records (see JSONHelp). Publisher and Stream are set only where
// the command knows them (consume), and then come first.
type JSONRecord struct {
	Publisher string       `json:"publisher,omitempty"`
	Stream    string       `json:"stream,omitempty"`
	Offset    uint64       `json:"offset"`
	ID        string       `json:"id,omitempty"` // omitted where unknown (dlq ls)
	Time      string       `json:"time"`
	Headers   []JSONHeader `json:"headers,omitempty"`
	Value     string       `json:"value"`
	Encoding  string       `json:"encoding,omitempty"`
}

// jsonValue returns b as a JSON string value and its encoding: "" for
// valid UTF-8, "base64" otherwise.
func jsonValue(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// newJSONRecord builds the JSON form of one record.
func newJSONRecord(publisher, stream string, offset uint64, id uuid.UUID, t time.Time, headers []spool.Header, value []byte) JSONRecord {
	jr := JSONRecord{Publisher: publisher, Stream: stream, Offset: offset, Time: t.UTC().Format(time.RFC3339Nano)}
	if id != uuid.Nil {
		jr.ID = id.String()
	}
	jr.Value, jr.Encoding = jsonValue(value)
	if len(headers) > 0 {
		jr.Headers = make([]JSONHeader, len(headers))
		for i, h := range headers {
			jr.Headers[i].Key = h.Key
			jr.Headers[i].Value, jr.Headers[i].Encoding = jsonValue(h.Value)
		}
	}
	return jr
}

// Encoder writes records as JSON lines in the one shape of JSONHelp. It is
// not safe for concurrent use.
type Encoder struct{ enc *json.Encoder }

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &Encoder{enc: enc}
}

// Encode writes one record as a JSON line. publisher and stream are
// omitted when empty.
func (e *Encoder) Encode(publisher, stream string, offset uint64, id uuid.UUID, t time.Time, headers []spool.Header, value []byte) error {
	return e.enc.Encode(newJSONRecord(publisher, stream, offset, id, t, headers, value))
}
