package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/records"
	"github.com/fastmq/fastmq/spool"
)

var spoolCmd = &cobra.Command{
	Use:   "spool",
	Short: "Append to, read, check and repair a stream's spool directory",
	Args:  cobra.NoArgs,
}

func init() {
	spoolCmd.AddCommand(newSpoolAppendCmd(), newSpoolReadCmd(), newSpoolVerifyCmd(),
		newSpoolRepairCmd(), newSpoolStatsCmd())
	rootCmd.AddCommand(spoolCmd)
}

func newSpoolAppendCmd() *cobra.Command {
	var dir, syncS, codecS string
	var ack bool
	cmd := &cobra.Command{
		Use:   "append --dir D",
		Short: "Append each line of standard input as a record",
		Long: "Appends each line of standard input (without its newline) as one record. " +
			"With --ack, prints each record's offset on its own line as soon as the record is durable " +
			"according to --sync.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, err := spool.ParseSyncPolicy(syncS)
			if err != nil {
				return err
			}
			codec, err := spool.ParseCodec(codecS)
			if err != nil {
				return err
			}
			l, err := spool.Open(spool.Config{Dir: dir, Sync: sp, Codec: codec, Logger: stderrLogger()})
			if err != nil {
				return err
			}
			err = records.AppendWith(cmd.Context(), l, cmd.InOrStdin(), cmd.OutOrStdout(), records.Options{Ack: ack, Errs: cmd.ErrOrStderr()})
			return errors.Join(err, l.Close())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the stream's spool `directory`")
	f.StringVar(&syncS, "sync", "group", "when a record is durable: each, group or none")
	f.StringVar(&codecS, "codec", "none", "batch compression: none, s2 or zstd")
	f.BoolVar(&ack, "ack", false, "print each record's offset once it is durable")
	cmd.MarkFlagRequired("dir")
	return cmd
}

func stderrLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newSpoolReadCmd() *cobra.Command {
	var dir, since string
	var from, count uint64
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "read --dir D",
		Short: "Print records, one value per line (or JSON)",
		Long: "Prints the records of a spool from an offset or a time, one value per line, or with " +
			"--json one JSON object per line. Reads without taking the writer's lock, so a writer may be appending.\n\n" +
			records.JSONHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := spool.OpenReadOnly(spool.Config{Dir: dir, Logger: stderrLogger()})
			if err != nil {
				return err
			}
			defer l.Close()
			start := from
			if since != "" {
				if cmd.Flags().Changed("from") {
					return errors.New("--from and --since exclude each other")
				}
				t, err := time.Parse(time.RFC3339Nano, since)
				if err != nil {
					return fmt.Errorf("--since: %w", err)
				}
				if start, err = l.SeekTime(t); err != nil {
					return err
				}
			} else if !cmd.Flags().Changed("from") {
				start = l.OldestOffset()
			}
			return records.Print(cmd.Context(), l, start, count, follow, asJSON, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the stream's spool `directory`")
	f.Uint64Var(&from, "from", 0, "first `offset` to print (default: the oldest); past the end of the log it fails, unless --follow")
	f.StringVar(&since, "since", "", "print from the first record at or after this RFC 3339 `time`")
	f.Uint64Var(&count, "count", 0, "stop after this many records (0: no limit)")
	f.BoolVar(&follow, "follow", false, "wait for new records at the end")
	f.BoolVar(&asJSON, "json", false, "print JSON objects (shape in the help above)")
	cmd.MarkFlagRequired("dir")
	return cmd
}

func newSpoolVerifyCmd() *cobra.Command {
	return dirCommand("verify --dir D", "Check every batch; list each damaged one with segment and offset", func(cmd *cobra.Command, dir string) error {
		rep, err := spool.Verify(dir)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "segments %d, batches %d, records %d, bytes %d, offsets %d..%d\n",
			rep.Segments, rep.Batches, rep.Records, rep.Bytes, rep.Oldest, rep.Next)
		for _, d := range rep.Damaged {
			fmt.Fprintln(out, "damaged:", d)
		}
		if !rep.Clean() {
			return fmt.Errorf("%d damaged batches in %s", len(rep.Damaged), dir)
		}
		fmt.Fprintln(out, "clean")
		return nil
	})
}

func newSpoolRepairCmd() *cobra.Command {
	return dirCommand("repair --dir D", "Quarantine damaged segments, keep their valid batches, report exactly what was removed", func(cmd *cobra.Command, dir string) error {
		rep, err := spool.Repair(dir, stderrLogger())
		out := cmd.OutOrStdout()
		for _, a := range rep.Actions {
			if a.Quarantined == "" {
				fmt.Fprintf(out, "segment %s (%s)\n", a.Segment, a.Reason)
			} else {
				fmt.Fprintf(out, "segment %s (%s): original kept as %s\n", a.Segment, a.Reason, a.Quarantined)
			}
			for _, r := range a.Removed {
				if r.To > r.From {
					fmt.Fprintf(out, "  removed offsets %d..%d (%d records, %d bytes at byte %d)\n", r.From, r.To-1, r.To-r.From, r.Bytes, r.Pos)
				} else {
					fmt.Fprintf(out, "  removed the end of the log from offset %d (%d bytes at byte %d)\n", r.From, r.Bytes, r.Pos)
				}
			}
			for _, k := range a.Kept {
				fmt.Fprintf(out, "  valid batches after the damage kept in %s\n", k)
			}
		}
		for _, r := range rep.Lost {
			fmt.Fprintf(out, "acknowledged offsets %d..%d are missing at the end of the log (%d records)\n", r.From, r.To-1, r.To-r.From)
		}
		if rep.MetaQuarantined != "" {
			fmt.Fprintf(out, "meta.json was damaged: kept as %s; the log has a new identity (consumers start over on it)\n", rep.MetaQuarantined)
		}
		if rep.NewEpoch {
			fmt.Fprintf(out, "new epoch %d from offset %d: consumers past it are told what was lost\n", rep.Epoch, rep.EpochStart)
		}
		if err != nil {
			return err
		}
		if !rep.Changed() {
			fmt.Fprintln(out, "nothing to repair")
		}
		return nil
	})
}

func newSpoolStatsCmd() *cobra.Command {
	return dirCommand("stats --dir D", "Print oldest and next offset, segments, bytes, time range and codecs", func(cmd *cobra.Command, dir string) error {
		l, err := spool.OpenReadOnly(spool.Config{Dir: dir, Logger: stderrLogger()})
		if err != nil {
			return err
		}
		defer l.Close()
		st := l.Stats()
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "log id:        %s\nepoch:         %d (from offset %d)\n", st.ID, st.Epoch, st.EpochStart)
		fmt.Fprintf(out, "oldest offset: %d\nnext offset:   %d\nsegments:      %d\nbatches:       %d\nbytes:         %d\n",
			st.Oldest, st.Next, st.Segments, st.Batches, st.Bytes)
		tf := func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(out, "oldest time:   %s\nnewest time:   %s\ncodec:        ", tf(st.OldestTime), tf(st.NewestTime))
		if len(st.Codecs) == 0 {
			fmt.Fprint(out, " -")
		}
		for _, c := range []spool.Codec{spool.CodecNone, spool.CodecS2, spool.CodecZstd} {
			if n := st.Codecs[c]; n > 0 {
				fmt.Fprintf(out, " %s (%d batches)", c, n)
			}
		}
		fmt.Fprintln(out)
		if err := l.Damage(); err != nil {
			var ce *spool.CorruptError
			if !errors.As(err, &ce) {
				return err
			}
			fmt.Fprintf(out, "damaged at:    offset %d (segment %s byte %d): %s\n", ce.Offset, ce.Segment, ce.Pos, ce.Reason)
			return fmt.Errorf("the log is damaged at offset %d (segment %s byte %d): run spool verify and spool repair",
				ce.Offset, ce.Segment, ce.Pos)
		}
		return nil
	})
}

// dirCommand is a spool tool that takes only --dir (required) and runs run
// with it.
func dirCommand(use, short string, run func(cmd *cobra.Command, dir string) error) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd, dir) },
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the stream's spool `directory`")
	cmd.MarkFlagRequired("dir")
	return cmd
}
