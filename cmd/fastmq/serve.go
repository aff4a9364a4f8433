package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// execStopGrace is how long a request's command (and what it started)
// has between SIGTERM and SIGKILL once the request's deadline passed.
const execStopGrace = time.Second

// maxErrText caps the stderr a failed command sends back as its error.
const maxErrText = 4 << 10

// execHandler runs shell command line for each request: the request on its
// stdin, its stdout the reply. A non-zero exit is a remote error with code
// "exit-N" and the command's stderr as the message. The environment gets
// FASTMQ_SERVICE and FASTMQ_NODE. The command, with whatever it started
// (its process group), is stopped when the request's deadline passes or
// the server closes: SIGTERM, then SIGKILL execStopGrace later.
func execHandler(line, service, node string) rpc.Handler {
	env := append(os.Environ(), "FASTMQ_SERVICE="+service, "FASTMQ_NODE="+node)
	return func(ctx context.Context, req []byte) ([]byte, error) {
		cmd := shellCommand(ctx, line, execStopGrace)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(req)
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
		err := cmd.Run()
		reap(ctx, cmd, execStopGrace)
		if err == nil {
			return stdout.Bytes(), nil
		}
		if ctx.Err() != nil {
			return nil, rpc.Errorf("deadline", "command stopped: %v", ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxErrText {
			msg = msg[:maxErrText]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if msg == "" {
				msg = ee.String()
			}
			return nil, &rpc.Error{Code: fmt.Sprintf("exit-%d", ee.ExitCode()), Message: msg}
		}
		return nil, rpc.Errorf("exec", "%v", err)
	}
}

func init() {
	var nf nodeFlags
	var execLine, bind, advertise string
	var concurrency int
	var drain time.Duration
	serve := &cobra.Command{
		Use:   "serve SERVICE --exec CMD",
		Short: "Serve an RPC service: run a command for each request, its output the reply",
		Long: "Runs a node that serves SERVICE (patterns/rpc over a ROUTER socket, advertised in the mesh). " +
			"Each request runs CMD with /bin/sh -c: the request on its stdin, its stdout the reply; " +
			"a non-zero exit is a remote error (code exit-N, message its stderr). CMD sees FASTMQ_SERVICE " +
			"and FASTMQ_NODE in its environment and is killed when the request's deadline passes.\n\n" +
			"Prints \"serving SERVICE node NAME gossip ADDR endpoint EP\" on stdout and \"bound EP\" on stderr once ready. " +
			"On SIGINT/SIGTERM it drains: withdraws the service, finishes the requests it accepted " +
			"(up to --drain), then leaves the mesh. Plain ZeroMQ REQ clients can call it at EP.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			service := args[0]
			if execLine == "" {
				return errors.New("--exec is required")
			}
			if concurrency < 0 || concurrency > rpc.MaxConcurrency {
				return fmt.Errorf("--concurrency %d: want 0 (the default, 64) to %d", concurrency, rpc.MaxConcurrency)
			}
			if drain < 0 {
				return fmt.Errorf("--drain %v: must not be negative", drain)
			}
			return nf.runNode(cmd.Context(), func(ctx context.Context, n *fastmq.Node) error {
				srv, err := n.Handle(service, execHandler(execLine, service, n.Name()), fastmq.HandleOptions{
					Endpoint:  bind,
					Advertise: advertise,
					Server:    rpc.ServerConfig{Concurrency: concurrency},
				})
				if err != nil {
					return err
				}
				ep := srv.Endpoints()[0]
				fmt.Fprintf(cmd.OutOrStdout(), "serving %s node %s gossip %s endpoint %s\n", service, n.Name(), n.GossipAddr(), ep)
				fmt.Fprintln(cmd.ErrOrStderr(), "bound", ep)
				<-ctx.Done()
				dctx, cancel := context.WithTimeout(context.Background(), drain)
				defer cancel()
				if err := srv.Shutdown(dctx); err != nil {
					return fmt.Errorf("drain %s: %w", service, err)
				}
				return nil
			})
		},
	}
	fl := serve.Flags()
	fl.StringVar(&execLine, "exec", "", "shell command run for each request (required)")
	fl.IntVar(&concurrency, "concurrency", 0, "requests run at once (0: 64)")
	fl.StringVar(&bind, "bind", "", "endpoint to serve on (default: the node's host, port 0)")
	fl.StringVar(&advertise, "advertise", "", "endpoint to advertise, if not the bound one")
	fl.DurationVar(&drain, "drain", 30*time.Second, "on SIGINT/SIGTERM, how long to wait for accepted requests")
	nf.register(serve, "name", hostnameOr("serve"))
	rootCmd.AddCommand(serve)
}
