package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/demo"
)

func init() {
	var opts demo.Options
	demoCmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a small log-shipping mesh on loopback and show that nothing is lost",
		Long: `demo runs the main job on nothing but loopback and a temporary directory:
three shipper processes follow access logs that are being written, a collector
process and an independent consumer find them by gossip and pull. Midway one
shipper and then the collector are killed with SIGKILL and restarted. At the
end the output is checked line by line: every produced line collected exactly
once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Duration <= 0 {
				return errors.New("--duration must be positive")
			}
			if opts.Rate <= 0 || opts.Rate > 1_000_000 {
				return errors.New("--rate must be between 1 and 1000000")
			}
			return demo.Run(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	demoCmd.Flags().DurationVar(&opts.Duration, "duration", 20*time.Second, "how long the shippers produce")
	demoCmd.Flags().IntVar(&opts.Rate, "rate", 5000, "access-log lines per second per shipper")
	demoCmd.Flags().StringVar(&opts.Dir, "dir", "", "working directory (default: a new temporary directory)")
	demoCmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep the working directory")
	rootCmd.AddCommand(demoCmd)
}
