package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/socket"
)

func init() {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen [--out NAME]",
		Short: "Make a CURVE key pair",
		Long: "Make a CURVE key pair, as libzmq's curve_keygen. Without --out, print the public " +
			"key and then the secret key, one line of 40 Z85 characters each. With --out NAME, " +
			"write NAME.key (the secret key, mode 0600) and NAME.pub (the public key), one line " +
			"of Z85 each as libzmq programs read them, refusing to overwrite either, and print " +
			"the public key.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pub, sec, err := socket.NewCurveKeypair()
			if err != nil {
				return err
			}
			if out == "" {
				fmt.Fprintln(cmd.OutOrStdout(), pub.Z85())
				fmt.Fprintln(cmd.OutOrStdout(), sec.Z85())
				return nil
			}
			if err := socket.WriteCurveKeypair(out, pub, sec); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), pub.Z85())
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s.key (secret, mode 0600) and %s.pub\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the pair to `NAME`.key and NAME.pub")
	rootCmd.AddCommand(cmd)
}
