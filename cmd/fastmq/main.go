// Command fastmq is the FastMQ command-line tool: socket tools for every
// ZeroMQ pattern, spool tools, a gossip agent, log shipping and a demo.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/heaproom"
)

// rootCmd is the top of the command tree. Each subcommand file registers
// itself with rootCmd in an init function.
var rootCmd = &cobra.Command{
	Use:           "fastmq",
	Short:         "Brokerless peer-to-peer messaging in the ZeroMQ style",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// version is the module's version from the build information ("devel"
// plus the VCS revision when built from a checkout).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		// A member or publisher with a few MiB live would otherwise
		// collect dozens of times a second at full speed. GOGC in the
		// environment is the user's choice, and turns this off.
		defer heaproom.Keep(heaproom.Default)()
	}
	rootCmd.Version = version()
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
