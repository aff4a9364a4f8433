package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/discovery"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// errCallsFailed ends call with a non-zero exit after every line was tried.
var errCallsFailed = errors.New("some calls failed")

func init() {
	var nf nodeFlags
	var timeout, attemptTimeout, waitFor time.Duration
	var retries int
	var idempotent bool
	call := &cobra.Command{
		Use:   "call SERVICE",
		Short: "Call an RPC service: each stdin line a request, each reply printed on its own line",
		Long: "Runs a node that calls SERVICE (patterns/rpc): each line of stdin, without its newline, " +
			"is one request; its reply is printed on stdout (with a newline added if it has none), in order. " +
			"A failed call prints \"error: ...\" on stderr and the next line is tried; call then exits non-zero.\n\n" +
			"Calls go to the least loaded instance and fail over to another when an instance dies. " +
			"Without --idempotent, a call whose instance dies before replying fails (it may have run) " +
			"instead of being retried; with it, each call carries an idempotency key and is retried, also " +
			"after --attempt-timeout (a third of --timeout by default: set it above the handler's time, or a " +
			"slow handler runs twice). Interrupted (SIGINT, SIGTERM) with a call waiting for its reply, or " +
			"after a failed call, call exits non-zero. Its node logs only warnings and errors (all with -v).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			service := args[0]
			if err := discovery.CheckServiceName(service); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v: must be positive", timeout)
			}
			if attemptTimeout < 0 {
				return fmt.Errorf("--attempt-timeout %v: must not be negative", attemptTimeout)
			}
			if retries < 0 {
				return fmt.Errorf("--retries %d: must not be negative", retries)
			}
			opts := rpc.CallOptions{Timeout: timeout, Idempotent: idempotent, Retries: retries, AttemptTimeout: attemptTimeout}
			if retries == 0 {
				opts.Retries = -1
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				if waitFor > 0 {
					// A fresh node learns the mesh by gossip: give it a moment.
					c, err := n.RPCClient(service)
					if err != nil {
						return err
					}
					wctx, cancel := context.WithTimeout(ctx, waitFor)
					c.WaitForInstances(wctx, 1)
					cancel()
				}
				return callLines(ctx, n, service, opts, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	fl := call.Flags()
	fl.DurationVar(&timeout, "timeout", 5*time.Second, "deadline of each call, retries included")
	fl.IntVar(&retries, "retries", 3, "retries after the first attempt, on other instances")
	fl.DurationVar(&attemptTimeout, "attempt-timeout", 0, "with --idempotent: how long one attempt waits before the call is retried elsewhere (0: a third of the time left)")
	fl.BoolVar(&idempotent, "idempotent", false, "give each call an idempotency key, so it may be retried after a timeout or a dead instance")
	fl.DurationVar(&waitFor, "wait", 5*time.Second, "at start, wait up to this long for the mesh to show an instance (0: fail at once if none)")
	nf.register(call, "name", hostnameOr("call"))
	nf.logLevel = slog.LevelWarn // stderr is for the calls' errors
	rootCmd.AddCommand(call)
}

// callLines calls service with each line of in and writes the replies. A
// goroutine reads in, so that a signal ends the command even while stdin
// is silent; it stays blocked in its read when the command returns, as the
// process is about to exit.
func callLines(ctx context.Context, n *fastmq.Node, service string, opts rpc.CallOptions, in io.Reader, out, errOut io.Writer) error {
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			select {
			case lines <- append([]byte(nil), sc.Bytes()...):
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	w := bufio.NewWriter(out)
	failed := 0
	// interrupted ends the command on a signal: an error if a call failed
	// or one was waiting for its reply (it may have run or not).
	interrupted := func(inFlight bool) error {
		if inFlight {
			fmt.Fprintln(errOut, "error: interrupted while a call waited for its reply")
			failed++
		}
		if failed > 0 {
			return fmt.Errorf("%w: %d (interrupted)", errCallsFailed, failed)
		}
		return nil
	}
	for {
		var line []byte
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
			return interrupted(false)
		}
		if !ok {
			break
		}
		if ctx.Err() != nil {
			return interrupted(false) // the line came as the signal did: not sent
		}
		reply, err := n.Call(ctx, service, line, opts)
		if err != nil && ctx.Err() != nil {
			return interrupted(true)
		}
		if err != nil {
			failed++
			fmt.Fprintln(errOut, "error:", err)
			continue
		}
		w.Write(reply)
		if len(reply) == 0 || reply[len(reply)-1] != '\n' {
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if err := <-readErr; err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d", errCallsFailed, failed)
	}
	return nil
}
