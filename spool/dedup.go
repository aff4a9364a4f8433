package spool

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Header keys that ask a Log to deduplicate a record (see "Idempotent
// appends" in the package documentation).
const (
	// HeaderMsgID carries a caller's message id (1 to MaxMsgIDLen bytes):
	// a record whose id was appended within Config.DedupWindow is a
	// duplicate. MsgID makes the header.
	HeaderMsgID = "fastmq-msg-id"
	// HeaderProducer carries "<producer>:<sequence>": the producer's id (1
	// to MaxProducerIDLen bytes, split at the last ':') and the record's
	// sequence number in decimal, from 1. ProducerSeq makes the header.
	HeaderProducer = "fastmq-producer"
)

// Defaults and limits of deduplication.
const (
	// DefaultDedupWindow is how long a message id is remembered (as
	// JetStream's default duplicate window).
	DefaultDedupWindow = 2 * time.Minute
	// DefaultMaxDedupIDs caps the message ids remembered at once.
	DefaultMaxDedupIDs = 1 << 20
	// DefaultMaxProducers caps the producers whose sequence a Log keeps.
	DefaultMaxProducers = 1024
	// MaxMsgIDLen and MaxProducerIDLen bound the ids in the headers.
	MaxMsgIDLen      = 256
	MaxProducerIDLen = 128
)

// Sentinel errors of deduplication. Test with errors.Is.
var (
	// ErrDuplicate matches *DuplicateError: every record of an append was
	// a duplicate, and nothing was appended.
	ErrDuplicate = errors.New("spool: duplicate")
	// ErrSequence matches *SequenceError: a producer's record came with a
	// sequence number that is neither the next one nor a repeat.
	ErrSequence = errors.New("spool: producer sequence out of order")
)

// DuplicateError is what Append (and Ack.Wait) return when every record
// of the call was a duplicate: nothing was appended. Offset is that of the
// record the first one repeats, when Known (a producer's repeat of its
// last sequence, or a message id); a producer's repeat of an older
// sequence has no known offset.
type DuplicateError struct {
	Offset uint64
	Known  bool
	Reason string // "message id ..." or "producer ... sequence ..."
}

// Error says what was repeated and where the original is.
func (e *DuplicateError) Error() string {
	if e.Known {
		return fmt.Sprintf("spool: duplicate (%s), stored at offset %d", e.Reason, e.Offset)
	}
	return fmt.Sprintf("spool: duplicate (%s)", e.Reason)
}

// Is makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// SequenceError reports a producer's record whose sequence would leave a
// gap (Last+1 was expected), or the first record of a producer the Log
// does not know (Unknown: never seen, or forgotten beyond
// Config.MaxProducers) whose sequence is not 1. Nothing of the append is
// stored.
type SequenceError struct {
	Producer string
	Seq      uint64 // the sequence of the record
	Last     uint64 // the producer's last sequence stored (0 when Unknown)
	Unknown  bool
}

// Error names the producer, the sequence and what was expected.
func (e *SequenceError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("spool: producer %q is unknown here (new, or forgotten beyond the producer limit): its first sequence must be 1, got %d; a producer that lost its place starts again under a new id", e.Producer, e.Seq)
	}
	return fmt.Sprintf("spool: producer %q: sequence %d after %d leaves sequences %d to %d missing", e.Producer, e.Seq, e.Last, e.Last+1, e.Seq-1)
}

// Is makes errors.Is(err, ErrSequence) true.
func (e *SequenceError) Is(target error) bool { return target == ErrSequence }

// Duplicate describes one record of an append that was not appended
// because it was a duplicate (see Ack.Duplicates).
type Duplicate struct {
	Index  int    // the record's index in the call
	Offset uint64 // the offset of the record it repeats, when Known
	Known  bool
}

// MsgID returns the header that gives a record the message id id: a
// record with the same id appended within Config.DedupWindow is a
// duplicate. Pass it among a record's headers (Node.Publish takes headers
// as its last arguments).
func MsgID(id string) Header { return Header{Key: HeaderMsgID, Value: []byte(id)} }

// ProducerSeq returns the header that numbers a record seq (from 1) for
// producer: the Log keeps each producer's last sequence and appends a
// record only if it is the next one.
func ProducerSeq(producer string, seq uint64) Header {
	v := make([]byte, 0, len(producer)+21)
	v = append(v, producer...)
	v = append(v, ':')
	v = strconv.AppendUint(v, seq, 10)
	return Header{Key: HeaderProducer, Value: v}
}

// dedupKey is what one record of an append asks of deduplication.
type dedupKey struct {
	idx      int    // the record's index in its Append
	msgID    string // "" for none
	producer string // "" for none
	seq      uint64
}

// parseDedup reads the deduplication headers of r (which has headers).
// ok is false when it has none that apply: ids when window is off
// (noIDs), producers when noProducers.
func parseDedup(r *Record, idx int, noIDs, noProducers bool) (k dedupKey, ok bool, err error) {
	k.idx = idx
	seenID, seenProd := false, false
	for i := range r.Headers {
		h := &r.Headers[i]
		switch h.Key {
		case HeaderMsgID:
			if seenID {
				return k, false, fmt.Errorf("two %s headers", HeaderMsgID)
			}
			seenID = true
			if len(h.Value) == 0 || len(h.Value) > MaxMsgIDLen {
				return k, false, fmt.Errorf("%s of %d bytes (want 1 to %d)", HeaderMsgID, len(h.Value), MaxMsgIDLen)
			}
			if !noIDs {
				k.msgID = string(h.Value)
			}
		case HeaderProducer:
			if seenProd {
				return k, false, fmt.Errorf("two %s headers", HeaderProducer)
			}
			seenProd = true
			p, seq, perr := parseProducer(h.Value)
			if perr != nil {
				return k, false, perr
			}
			if !noProducers {
				k.producer, k.seq = p, seq
			}
		}
	}
	return k, k.msgID != "" || k.seq != 0, nil
}

// parseProducer splits a HeaderProducer value.
func parseProducer(v []byte) (string, uint64, error) {
	i := bytes.LastIndexByte(v, ':')
	if i < 1 || i > MaxProducerIDLen {
		return "", 0, fmt.Errorf("%s %q: want <producer>:<sequence>, the producer 1 to %d bytes", HeaderProducer, truncate(v), MaxProducerIDLen)
	}
	seq, err := strconv.ParseUint(string(v[i+1:]), 10, 64)
	if err != nil || seq == 0 {
		return "", 0, fmt.Errorf("%s %q: the sequence must be a decimal number from 1", HeaderProducer, truncate(v))
	}
	return string(v[:i]), seq, nil
}

func truncate(v []byte) []byte {
	if len(v) > 64 {
		return v[:64]
	}
	return v
}

// Duplicates waits for Done and returns the records of the append that were not
// appended because they were duplicates, in call order; nil when none
// (always, for records without deduplication headers). When some records
// of a call are duplicates and others not, the others are appended,
// contiguous and in order, from the offset Wait returns. The caller owns
// the slice.
func (a *Ack) Duplicates() []Duplicate {
	<-a.done
	if a.dd == nil {
		return nil
	}
	return append([]Duplicate(nil), a.dd.dups...)
}
