package records

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/spool"
)

// Options say how AppendWith turns lines into records.
type Options struct {
	// Ack prints each record's offset as its append becomes durable; a
	// line found to be a duplicate prints the offset of the record it
	// repeats followed by " duplicate"; a line refused for lack of space
	// prints "refused: REASON".
	Ack bool
	// Errs receives, at most once a second, how many records were refused
	// for lack of space (spool.ErrNoSpace) and why; nil discards it. A
	// refusal does not stop the appends: the next line is tried, and is
	// taken once space returns.
	Errs io.Writer
	// IDHeader: each line is ID<TAB>VALUE; ID becomes the record's
	// message id (spool.HeaderMsgID, deduplicated within the stream's
	// window) and the value of the header IDHeader too, VALUE the record's
	// value.
	IDHeader string
	// Dedup: the message id of each line is a hash of the line (SHA-256,
	// the first 16 bytes in hex), so a line sent again within the window
	// is stored once.
	Dedup bool
	// Keyed: each line (after its ID field, with IDHeader) is KEY<TAB>VALUE;
	// KEY becomes the record's key (group.HeaderKey: an ordered consumer
	// group delivers the records of one key in order, one at a time).
	Keyed bool
	// Delay, if positive, gives each record a not-before time (group.NotBefore)
	// Delay after its line was read: consumer groups do not lease it
	// before then.
	Delay time.Duration
}

// DedupHelp describes --id-header and --dedup, for the commands' help.
const DedupHelp = `Idempotent publish: with --dedup, each line's message id (header
fastmq-msg-id) is a hash of the line, so publishing the same input again
within the stream's deduplication window (2 minutes by default) stores each
line once: a retry after a failure does not duplicate what got through.
Identical lines within the window are stored once too. With --id-header NAME,
each line is ID<TAB>VALUE: ID is the record's message id (and the value of
header NAME), VALUE its value; a line whose ID was published within the
window is not stored again. With --ack a duplicate prints the offset of the
record it repeats followed by " duplicate".

For consumer groups: with --keyed each line is KEY<TAB>VALUE (ID<TAB>KEY<TAB>VALUE
with --id-header), KEY the record's key (header fastmq-key: an ordered group,
fastmq consume --group G --ordered, delivers one key's records in order, one at
a time); with --delay D each record is not leased to a group before D after
it was read (header fastmq-not-before).`

// recordOf turns one input line into a record as opt says; the line is
// the caller's to keep.
func recordOf(line []byte, n int, opt Options) (spool.Record, error) {
	var hs []spool.Header
	rest := line
	if opt.IDHeader != "" {
		id, v, ok := bytes.Cut(rest, []byte{'\t'})
		if !ok || len(id) == 0 {
			return spool.Record{}, fmt.Errorf("line %d: with --id-header each line is ID<TAB>VALUE", n)
		}
		if len(id) > spool.MaxMsgIDLen {
			return spool.Record{}, fmt.Errorf("line %d: the id is %d bytes, at most %d", n, len(id), spool.MaxMsgIDLen)
		}
		hs = append(hs, spool.MsgID(string(id)))
		if opt.IDHeader != spool.HeaderMsgID {
			hs = append(hs, spool.Header{Key: opt.IDHeader, Value: []byte(string(id))})
		}
		rest = v
	}
	if opt.Keyed {
		k, v, ok := bytes.Cut(rest, []byte{'\t'})
		if !ok || len(k) == 0 {
			if opt.IDHeader != "" {
				return spool.Record{}, fmt.Errorf("line %d: with --id-header and --keyed each line is ID<TAB>KEY<TAB>VALUE", n)
			}
			return spool.Record{}, fmt.Errorf("line %d: with --keyed each line is KEY<TAB>VALUE", n)
		}
		hs = append(hs, group.Key(string(k)))
		rest = v
	}
	if opt.Dedup {
		sum := sha256.Sum256(line)
		hs = append(hs, spool.MsgID(hex.EncodeToString(sum[:16])))
	}
	if opt.Delay > 0 {
		hs = append(hs, group.NotBefore(time.Now().Add(opt.Delay)))
	}
	return spool.Record{Value: append([]byte(nil), rest...), Headers: hs}, nil
}

// AppendWith appends each line of in (without its newline) as one record
// of l, turned into a record as opt says, with up to 4096 appends in
// flight; with opt.Ack, a printer writes each record's offset to out, in
// order, as its append becomes durable. It stops at the end of in or when
// ctx ends (then it closes a file input so that a pending read returns),
// and returns once every acknowledgement is printed.
func AppendWith(ctx context.Context, l *spool.Log, in io.Reader, out io.Writer, opt Options) error {
	ack := opt.Ack
	// A read of stdin blocks until a line comes: when ctx ends, close the
	// input so that the read returns and the command stops at once.
	in = interruptible(in)
	if c, ok := in.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	acks := make(chan pending, 4096)
	printed := make(chan error, 1)
	ref := refusals{w: opt.Errs}
	go func() {
		w := bufio.NewWriter(out)
		var err error
		for {
			var p pending
			select {
			case p = <-acks:
			default:
				if ferr := w.Flush(); ferr != nil && err == nil {
					err = ferr
				}
				p = <-acks
			}
			if p == (pending{}) {
				break
			}
			if p.refused != nil {
				if ack {
					fmt.Fprintln(w, "refused:", p.refused)
				}
				continue
			}
			a := p.ack
			select {
			case <-a.Done():
			default:
				if ferr := w.Flush(); ferr != nil && err == nil {
					err = ferr
				}
			}
			first, aerr := a.Wait(context.Background())
			if errors.Is(aerr, spool.ErrNoSpace) {
				ref.add(aerr)
				if ack {
					fmt.Fprintln(w, "refused:", aerr)
				}
				continue
			}
			var de *spool.DuplicateError
			if errors.As(aerr, &de) {
				if ack {
					fmt.Fprintln(w, de.Offset, "duplicate")
				}
				continue
			}
			if aerr != nil {
				if err == nil {
					err = aerr
				}
				continue
			}
			if ack {
				fmt.Fprintln(w, first)
			}
		}
		if ferr := w.Flush(); ferr != nil && err == nil {
			err = ferr
		}
		printed <- err
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var err error
	n := 0
	for sc.Scan() {
		if ctx.Err() != nil {
			break
		}
		n++
		rec, rerr := recordOf(sc.Bytes(), n, opt)
		if rerr != nil {
			err = rerr
			break
		}
		a, aerr := l.AppendAsync(ctx, rec)
		if errors.Is(aerr, spool.ErrNoSpace) {
			ref.add(aerr)
			acks <- pending{refused: aerr}
			continue
		}
		if aerr != nil {
			err = aerr
			break
		}
		acks <- pending{ack: a}
	}
	if serr := sc.Err(); serr != nil && err == nil && ctx.Err() == nil {
		err = fmt.Errorf("read input: %w", serr)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // interrupted: what was acknowledged is printed below
	}
	close(acks)
	err = errors.Join(err, <-printed)
	ref.flush()
	return err
}

// pending is an append whose outcome is still to be printed: its Ack, or
// its refusal at AppendAsync.
type pending struct {
	ack     *spool.Ack
	refused error
}

// refusals reports appends refused for lack of space, at most once a
// second. Safe for concurrent use.
type refusals struct {
	w      io.Writer
	mu     sync.Mutex
	n      int
	last   error
	logged time.Time
}

func (r *refusals) add(err error) {
	if r.w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.last = err
	if time.Since(r.logged) >= time.Second {
		r.printLocked()
	}
}

// flush prints what was refused since the last report.
func (r *refusals) flush() {
	if r.w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n > 0 {
		r.printLocked()
	}
}

func (r *refusals) printLocked() {
	fmt.Fprintf(r.w, "refused %d record(s): %v\n", r.n, r.last)
	r.n, r.logged = 0, time.Now()
}

// interruptible returns a file input (stdin, usually a pipe or a terminal)
// reopened in non-blocking mode, so that Go's poller waits for it and
// closing it ends a pending read; other readers are returned as they are.
func interruptible(in io.Reader) io.Reader {
	f, ok := in.(*os.File)
	if !ok {
		return in
	}
	fd := f.Fd()
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		return in
	}
	return os.NewFile(fd, f.Name())
}
