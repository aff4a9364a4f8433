package main

import "github.com/spf13/cobra"

// benchCmd is the parent of the benchmark subcommands (bench pushpull,
// bench pubsub, bench reqrep, bench spool, ...). Each subcommand file adds
// itself to benchCmd in its own init function.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure throughput and latency",
	Long: "Measures throughput and latency of FastMQ's sockets and spool on this machine. " +
		"Every subcommand prints messages per second, megabytes per second and latency percentiles.",
	Args: cobra.NoArgs,
}

func init() {
	rootCmd.AddCommand(benchCmd)
}
