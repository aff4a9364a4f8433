package records

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/fastmq/fastmq/spool"
)

// Append appends each line of in (without its newline) as one record of
// l, with up to 4096 appends in flight; with ack, a printer writes each
// record's offset to out, in order, as its append becomes durable. It
// stops at the end of in or when ctx ends (then it closes a file input so
// that a pending read returns), and returns once every acknowledgement is
// printed.
func Append(ctx context.Context, l *spool.Log, in io.Reader, out io.Writer, ack bool) error {
	// A read of stdin blocks until a line comes: when ctx ends, close the
	// input so that the read returns and the command stops at once.
	in = interruptible(in)
	if c, ok := in.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	acks := make(chan *spool.Ack, 4096)
	printed := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(out)
		var err error
		for {
			var a *spool.Ack
			select {
			case a = <-acks:
			default:
				if ferr := w.Flush(); ferr != nil && err == nil {
					err = ferr
				}
				a = <-acks
			}
			if a == nil {
				break
			}
			select {
			case <-a.Done():
			default:
				if ferr := w.Flush(); ferr != nil && err == nil {
					err = ferr
				}
			}
			first, aerr := a.Wait(context.Background())
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
	for sc.Scan() {
		if ctx.Err() != nil {
			break
		}
		v := append([]byte(nil), sc.Bytes()...)
		a, aerr := l.AppendAsync(ctx, spool.Record{Value: v})
		if aerr != nil {
			err = aerr
			break
		}
		acks <- a
	}
	if serr := sc.Err(); serr != nil && err == nil && ctx.Err() == nil {
		err = fmt.Errorf("read input: %w", serr)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // interrupted: what was acknowledged is printed below
	}
	close(acks)
	return errors.Join(err, <-printed)
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
