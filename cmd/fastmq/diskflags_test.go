package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastmq/fastmq"
)

// parseNodeFlags parses args (with a temporary --data) as a node
// command's flags and returns the node configuration they make.
func parseNodeFlags(t *testing.T, args ...string) (fastmq.Config, error) {
	t.Helper()
	var f nodeFlags
	cmd := &cobra.Command{Use: "x"}
	f.register(cmd, "name", "n")
	if err := cmd.Flags().Parse(append([]string{"--data", t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	return f.config()
}

// TestNoLocalIPCFlag: --no-local-ipc keeps the node's RPC on tcp.
func TestNoLocalIPCFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--no-local-ipc"}, true}} {
		if cfg, err := parseNodeFlags(t, c.args...); err != nil || cfg.NoLocalIPC != c.want {
			t.Errorf("%q: NoLocalIPC %v, %v; want %v", c.args, cfg.NoLocalIPC, err, c.want)
		}
	}
}

// TestDiskGuardFlags: the --disk-* flags make the node's DiskGuard, and
// bad values are refused naming the flag.
func TestDiskGuardFlags(t *testing.T) {
	parse := func(args ...string) (fastmq.Config, error) { return parseNodeFlags(t, args...) }
	cfg, err := parse()
	if err != nil || cfg.DiskGuard != (fastmq.DiskGuard{MinFreePercent: 5}) {
		t.Fatalf("defaults: %+v, %v", cfg.DiskGuard, err)
	}
	cfg, err = parse("--disk-max-bytes", "1000", "--disk-min-free-bytes", "10", "--disk-min-free-percent", "0", "--disk-policy", "drop-oldest")
	if want := (fastmq.DiskGuard{MaxBytes: 1000, MinFreeBytes: 10, MinFreePercent: -1, Policy: fastmq.DiskDropOldest}); err != nil || cfg.DiskGuard != want {
		t.Fatalf("got %+v, %v; want %+v", cfg.DiskGuard, err, want)
	}
	for _, bad := range [][]string{{"--disk-max-bytes", "-1"}, {"--disk-min-free-bytes", "-1"}, {"--disk-min-free-percent", "100"}, {"--disk-policy", "panic"}} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, bad[0])
		}
	}
}

// TestSpoolSyncFlags: --visible-before-sync and --min-sync-interval reach
// the node's spool configuration, a negative interval too.
func TestSpoolSyncFlags(t *testing.T) {
	parse := func(args ...string) (fastmq.Config, error) { return parseNodeFlags(t, args...) }
	cfg, err := parse()
	if err != nil || cfg.Spool.VisibleBeforeSync || cfg.Spool.MinSyncInterval != 0 {
		t.Fatalf("defaults: %+v, %v", cfg.Spool, err)
	}
	cfg, err = parse("--visible-before-sync", "--min-sync-interval", "5ms")
	if err != nil || !cfg.Spool.VisibleBeforeSync || cfg.Spool.MinSyncInterval != 5*time.Millisecond {
		t.Fatalf("got %+v, %v; want VisibleBeforeSync and MinSyncInterval 5ms", cfg.Spool, err)
	}
	// Negative: back to back even with --visible-before-sync (the spool
	// paces them 2 ms apart for a zero interval there).
	cfg, err = parse("--visible-before-sync", "--min-sync-interval", "-1ms")
	if err != nil || !cfg.Spool.VisibleBeforeSync || cfg.Spool.MinSyncInterval >= 0 {
		t.Fatalf("got %+v, %v; want VisibleBeforeSync and a negative MinSyncInterval", cfg.Spool, err)
	}
}

// TestDeliverBeforeSyncAlias: the option's old node flag name still sets
// it, and is hidden from help.
func TestDeliverBeforeSyncAlias(t *testing.T) {
	cfg, err := parseNodeFlags(t, "--deliver-before-sync")
	if err != nil || !cfg.Spool.VisibleBeforeSync {
		t.Fatalf("--deliver-before-sync: VisibleBeforeSync %v, %v; want true", cfg.Spool.VisibleBeforeSync, err)
	}
	var f nodeFlags
	cmd := &cobra.Command{Use: "x"}
	f.register(cmd, "name", "n")
	if fl := cmd.Flags().Lookup("deliver-before-sync"); fl == nil || !fl.Hidden || fl.Deprecated == "" {
		t.Fatalf("--deliver-before-sync: %+v; want a hidden, deprecated flag", fl)
	}
	if strings.Contains(cmd.Flags().FlagUsages(), "deliver-before-sync") {
		t.Fatalf("help lists --deliver-before-sync")
	}
}
