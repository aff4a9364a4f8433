package wire

import (
	"github.com/fastmq/fastmq/spool"
)

// ReplyData builds a fetch reply's data: in one buffer, or with
// FlagFrames (split) in frames of at most FrameBytes (a record bigger
// than that alone), each a buffer of its own. Those are small objects,
// whose memory the runtime reuses; one buffer for a reply of thousands
// of records would be a large allocation, zeroed and given back to the
// system one by one.
type ReplyData struct {
	Split    bool
	MaxBytes int      // the fetch's byte limit, to size a single buffer
	frames   [][]byte // the frames filled
	cur      []byte   // the frame being filled
}

// Add appends r, leased for its delivery-th time; left is how many
// records the reply may still take, this one included, to size buffers.
func (d *ReplyData) Add(r *spool.Record, delivery uint32, left int) {
	w := RecordLen(r)
	if d.Split && len(d.cur) > 0 && len(d.cur)+w > FrameBytes {
		d.frames = append(d.frames, d.cur)
		d.cur = nil
	}
	if d.cur == nil {
		n := min(max(left, 1)*w, d.MaxBytes+w)
		if d.Split {
			n = max(min(n, FrameBytes), w)
		}
		d.cur = make([]byte, 0, n)
	}
	d.cur = AppendSpool(d.cur, r, delivery)
}

// Done returns the data frames: none for no record.
func (d *ReplyData) Done() [][]byte {
	if d.cur != nil {
		d.frames = append(d.frames, d.cur)
		d.cur = nil
	}
	return d.frames
}

// FetchReply returns the frames of an ok fetch reply of n records in
// data (frames of whole records, see ReplyData).
func FetchReply(id, n uint32, data [][]byte) [][]byte {
	return FetchReplyStatus(StatusOK, id, n, data)
}

// FetchReplyStatus is FetchReply with a status: StatusOpen for a
// FlagStream fetch that stays open.
func FetchReplyStatus(st Status, id, n uint32, data [][]byte) [][]byte {
	var first []byte
	if len(data) > 0 {
		first = data[0]
	}
	f := EncodeReply(&Reply{Status: st, ID: id, Count: n, Data: first})
	if len(data) <= 1 {
		return f
	}
	return append(f, data[1:]...)
}

// RecordLen returns the length of r as a fetch reply's record.
func RecordLen(r *spool.Record) int {
	n := 8 + 4 + 8 + 2 + 4 + len(r.Value)
	for _, h := range r.Headers {
		n += 2 + len(h.Key) + 4 + len(h.Value)
	}
	return n
}

// AppendSpool appends r as a fetch reply's record (see Reply).
func AppendSpool(b []byte, r *spool.Record, delivery uint32) []byte {
	return AppendRecord(b, r.Offset, delivery, r.Time, r.Headers, r.Value)
}

// FromSpool returns r, leased for its delivery-th time, as a wire Record
// (for replies built from Records).
func FromSpool(r spool.Record, delivery uint32) Record {
	return Record{Offset: r.Offset, Delivery: delivery, Time: r.Time, Headers: r.Headers, Value: r.Value}
}
