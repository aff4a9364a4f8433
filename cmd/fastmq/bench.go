package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq/cmd/fastmq/internal/bench"
	"github.com/fastmq/fastmq/spool"
)

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

func init() {
	for _, p := range []struct{ name, short string }{
		{"pushpull", "Throughput and one-way latency of PUSH to PULL"},
		{"pubsub", "Throughput and one-way latency of PUB to SUB"},
		{"reqrep", "Round-trip latency and rate of REQ to REP"},
	} {
		benchCmd.AddCommand(newSocketBenchCmd(p.name, p.short))
	}
}

func newSocketBenchCmd(pattern, short string) *cobra.Command {
	o := &bench.SocketOptions{}
	cmd := &cobra.Command{
		Use:   pattern,
		Short: short,
		Long: short + ".\n\n" +
			"Without --bind/--connect both ends run in this process over --transport. " +
			"To run the ends as separate processes, start one with --role recv (the PULL, SUB " +
			"or REP end) and one with --role send, one of them binding and the other connecting " +
			"to the same endpoint. The receiving end of pushpull/pubsub (the REQ end of reqrep) " +
			"prints the figures. Messages carry their send time in their first 8 bytes, which " +
			"gives the one-way latency (under full load) of pushpull and pubsub.\n\n" +
			"--libzmq PERF.PY runs libzmq's figure for the same test through the perf script " +
			"shipped with the socket package's interop suite (both ends libzmq, in separate " +
			"processes) and prints the ratio.\n\n" +
			"--curve encrypts both ends with CURVE (libzmq's test server key pair, known to " +
			"everyone: it measures the cost, it protects nothing).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Socket(cmd.Context(), cmd.OutOrStdout(), pattern, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Size, "size", 100, "message size in `BYTES`")
	defCount := 200000
	if pattern == "reqrep" {
		defCount = 20000
	}
	f.IntVar(&o.Count, "count", defCount, "number of messages (round trips for reqrep)")
	f.StringVar(&o.Transport, "transport", "tcp", "tcp, ipc or inproc (one-process mode)")
	f.StringVar(&o.Bind, "bind", "", "separate-process mode: bind to `ENDPOINT`")
	f.StringVar(&o.Connect, "connect", "", "separate-process mode: connect to `ENDPOINT`")
	f.StringVar(&o.Role, "role", "", "separate-process mode: send or recv")
	f.IntVar(&o.HWM, "hwm", 0, "high-water mark in messages (0: library default)")
	f.DurationVar(&o.Warmup, "warmup", time.Second, "pubsub separate-process sender: publish warm-up messages this long before measuring")
	f.StringVar(&o.Libzmq, "libzmq", "", "also run libzmq's figure with this perf script (perf.py)")
	f.BoolVar(&o.Native, "native", false, "with --libzmq: both libzmq ends in C (needs a C compiler), not pyzmq")
	py := "python3"
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py = "/usr/bin/python3"
	}
	f.StringVar(&o.Python, "python", py, "Python interpreter with pyzmq, for --libzmq")
	f.BoolVar(&o.Separate, "separate", false, "run the receiving end (REP for reqrep) in a child process of this command")
	f.BoolVar(&o.JSON, "json", false, "print the result as JSON (used by --separate)")
	f.MarkHidden("json")
	if pattern == "pubsub" {
		f.BoolVar(&o.NoDrop, "no-drop", false, "the publisher waits for the subscriber instead of dropping (ZMQ_XPUB_NODROP)")
	}
	f.BoolVar(&o.Curve, "curve", false, "CURVE security on both ends: the receiving end (PULL, SUB or REP) the server, the other its client (with --libzmq, libzmq's figure with CURVE too)")
	f.IntVar(&o.Rounds, "rounds", 1, "repeat the run `N` times (alternating with libzmq's under --libzmq) and print the medians")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of this process to `FILE` (with --separate, the child's goes to FILE.recv)")
	return cmd
}

func init() {
	var count, size, rate int
	var codec, syncPol string
	var groupInterval, minSync time.Duration
	var reference, early bool
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "End to end: append to a spool, serve it over tcp loopback, consume it",
		Long: `bench pull measures one publisher to one consumer over tcp loopback: records
are appended with the chosen sync policy while a consumer pulls them.

Without --rate it appends as fast as it can (4 group commits of 1024 records in
flight) and prints records/s and MB/s end to end. With --rate R it appends R
records per second, one at a time, and prints append-to-delivery latency
percentiles, the group commits' fdatasync histogram and, with --reference,
the same figures for a bare group commit (pwrite and fdatasync, nothing else)
at the same rate right after: the floor of the disk at that moment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count <= 0 || size <= 0 || rate < 0 {
				return errors.New("--count and --size must be positive and --rate not negative")
			}
			c, err := spool.ParseCodec(codec)
			if err != nil {
				return fmt.Errorf("--codec: %w", err)
			}
			sp, err := spool.ParseSyncPolicy(syncPol)
			if err != nil {
				return fmt.Errorf("--sync: %w", err)
			}
			if err := bench.Pull(cmd.Context(), cmd.OutOrStdout(), count, size, rate, spool.Config{Codec: c, Sync: sp, GroupInterval: groupInterval, MinSyncInterval: minSync, VisibleBeforeSync: early}); err != nil {
				return err
			}
			if reference && rate > 0 {
				return bench.PullReference(cmd.Context(), cmd.OutOrStdout(), count, size, rate)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 1_000_000, "records to pass end to end")
	cmd.Flags().IntVar(&size, "size", 100, "record value size in bytes")
	cmd.Flags().IntVar(&rate, "rate", 0, "append this many records per second and report latency (0: as fast as possible)")
	cmd.Flags().StringVar(&codec, "codec", "s2", "batch codec: none, s2 or zstd")
	cmd.Flags().StringVar(&syncPol, "sync", "group", "sync policy: each, group or none")
	cmd.Flags().DurationVar(&minSync, "min-sync-interval", 0, "group commit: least time between the starts of two fsyncs (0: as a node's streams, 500µs, or 2ms with --visible-before-sync; negative: none)")
	cmd.Flags().BoolVar(&reference, "reference", false, "with --rate: also run a bare group commit (pwrite + fdatasync) at the same rate and print its figures")
	cmd.Flags().BoolVar(&early, "visible-before-sync", false, "serve records to the consumer once written, before their group commit's fdatasync (spool.Config.VisibleBeforeSync; appends are still acknowledged once durable)")
	cmd.Flags().DurationVar(&groupInterval, "group-interval", -1, "group commit: longest wait for more records before an fsync (negative: none, as a node's streams; 0: the spool default of 1ms)")
	benchCmd.AddCommand(cmd)
}

func init() {
	o := &bench.SpoolOptions{}
	cmd := &cobra.Command{
		Use:   "spool",
		Short: "Append and read throughput of the spool",
		Long: "Measures the spool on this machine's disk, each run in a fresh directory:\n" +
			"  group          one goroutine, Append of --batch records per call, group commit; each call returns after its fsync\n" +
			"  group-async    one goroutine, AppendAsync of --batch records per call with --inflight calls outstanding; counted when acknowledged (after fsync)\n" +
			"  each-1         one goroutine, Append of one record per call, fsync before each returns\n" +
			"  each-N         --writers goroutines, Append of one record per call, fsync before each returns (concurrent calls share fsyncs)\n" +
			"  read           sequential read with a Reader of the records written by group-async (warm page cache)\n" +
			"Records are --size bytes of text. Prints records/s and MB/s of record values.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Spool(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "parent `directory` for the test spools (default: a temporary directory, removed afterwards)")
	f.IntVar(&o.Count, "count", 1_000_000, "records for the group and read runs")
	f.IntVar(&o.Size, "size", 100, "record value size in `BYTES`")
	f.IntVar(&o.Batch, "batch", 1024, "records per Append call in the group runs")
	f.IntVar(&o.Inflight, "inflight", 16, "outstanding AppendAsync calls in group-async")
	f.IntVar(&o.EachCount, "each-count", 2000, "records per writer in the each runs")
	f.IntVar(&o.Writers, "writers", 64, "concurrent writers in each-N")
	f.StringVar(&o.Codec, "codec", "none", "batch compression: none, s2 or zstd")
	f.BoolVar(&o.JSON, "json", false, "print results as JSON lines")
	benchCmd.AddCommand(cmd)
}

func init() {
	o := &bench.SoakOptions{}
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run a publisher and churning consumers for a long time and watch for leaks",
		Long: `bench soak runs one publisher node and --consumers consumer nodes in this
process, on loopback gossip, for --duration: the publisher appends --rate records
per second (with byte retention, so segments roll and are deleted), every
consumer node pulls them all, and each consumer node leaves and joins again
after a random lifetime around --churn (every fourth leave abrupt, the others
graceful). Every --interval, and at the end, it prints the process's resident
memory, goroutines and open files, and at the end their slope per minute (after
the first interval, the warm-up): a leak shows as a steady positive slope.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration <= 0 || o.Interval < 0 || o.Consumers < 0 || o.Rate < 0 || o.Size < 0 || o.Churn < 0 {
				return errors.New("--duration must be positive and --interval, --consumers, --rate, --size and --churn not negative")
			}
			return bench.Soak(cmd.Context(), cmd.OutOrStdout(), *o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long to run")
	f.DurationVar(&o.Interval, "interval", time.Minute, "print a sample this often")
	f.IntVar(&o.Consumers, "consumers", 8, "consumer nodes")
	f.IntVar(&o.Rate, "rate", 2000, "records published per second")
	f.IntVar(&o.Size, "size", 100, "record value size in `BYTES`")
	f.DurationVar(&o.Churn, "churn", 10*time.Second, "a consumer node's mean lifetime before it leaves and joins again")
	benchCmd.AddCommand(cmd)
}

func init() {
	o := bench.GroupOptions{}
	cmd := &cobra.Command{
		Use:   "group",
		Short: "End to end: one publisher, member processes of one consumer group, explicit acks",
		Long: `bench group measures consumer groups end to end: this process is the publisher
(spool, spool server and group server on tcp loopback) and starts --members member
processes of one group. It appends --count records of --size bytes while the
members lease them, handle them (doing nothing) and acknowledge each one
explicitly; an ack counts once the publisher's group commit has it on disk.

Without --rate it appends as fast as it can and prints acknowledged records/s,
from the first append to the last acknowledgement. With --rate R it appends R
records per second, one at a time, and prints append-to-delivery percentiles
(from the append to the member's handler).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.MemberProcs < 0 {
				return fmt.Errorf("--member-procs %d: must not be negative", o.MemberProcs)
			}
			return bench.Group(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Count, "count", 1_000_000, "records")
	f.IntVar(&o.Size, "size", 100, "record value size in `BYTES`")
	f.IntVar(&o.Members, "members", 3, "member processes")
	f.IntVar(&o.Rate, "rate", 0, "append this many records per second and report latency (0: as fast as possible)")
	f.IntVar(&o.Buffer, "buffer", 4096, "a member's buffer of leased records (MemberConfig.Buffer)")
	f.IntVar(&o.Concurrency, "concurrency", 16, "a member's handler goroutines (Run's concurrency)")
	f.IntVar(&o.MaxAckPending, "max-ack-pending", 16384, "a member's MaxAckPending")
	f.IntVar(&o.MemberProcs, "member-procs", 1, "each member process's GOMAXPROCS (0: the runtime's default, one per core); 1 by default, as the processes of a run share the cores: a member at 1 spends 10-15 % less CPU a record, not spinning for work")
	f.IntVar(&o.Rounds, "rounds", 1, "repeat the run `N` times and print the median")
	f.BoolVar(&o.JSON, "json", false, "print each round as a JSON line")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write the publisher's CPU profile to `FILE` (member i's to FILE.member<i>)")
	f.StringVar(&o.MemProfile, "memprofile", "", "write the publisher's allocation profile to `FILE` at the end (member i's to FILE.member<i>)")
	f.StringVar(&o.LatencyFile, "latency-file", "", "with --rate: write every delivered record as a CSV line to `FILE` (round, member, offset, and the Unix ns of its append, its acknowledgement and its delivery)")
	f.BoolVar(&o.VisibleBeforeSync, "visible-before-sync", false, "serve records to every reader once written, before their fdatasync (spool.Config.VisibleBeforeSync, a node's --visible-before-sync)")
	f.BoolVar(&o.LeaseAfterSync, "lease-after-sync", false, "lease records to the members only once durable, after their fdatasync (group.ServerConfig.LeaseAfterSync, a node's --group-lease-after-sync; by default they are leased once written)")
	f.DurationVar(&o.MinSyncInterval, "min-sync-interval", 0, "least time between the starts of two of the stream's fdatasyncs (spool.Config.MinSyncInterval; 0: as a node's streams, 500µs, or 2ms with --visible-before-sync; negative: back to back)")
	f.StringVar(&o.Role, "role", "", "internal: member")
	f.StringVar(&o.Connect, "connect", "", "internal: the publisher's spool endpoint")
	f.MarkHidden("role")
	f.MarkHidden("connect")
	benchCmd.AddCommand(cmd)
}
