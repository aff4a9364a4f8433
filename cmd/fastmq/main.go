// Command fastmq is the FastMQ command-line tool: socket tools for every
// ZeroMQ pattern, spool tools, a gossip agent, log shipping and a demo.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// rootCmd is the top of the command tree. Each subcommand file registers
// itself with rootCmd in an init function.
var rootCmd = &cobra.Command{
	Use:           "fastmq",
	Short:         "Brokerless peer-to-peer messaging in the ZeroMQ style",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is the one line main prints for err: prefixed with "fastmq:"
// once, whether or not the error already carries the library's prefix.
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "fastmq: ") {
		return msg
	}
	return "fastmq: " + msg
}
