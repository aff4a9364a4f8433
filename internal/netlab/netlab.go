// Package netlab builds small networks of Linux network namespaces for
// tests: hosts with their own addresses, joined by a switch, that a test can
// run processes in and partition. Everything it makes is removed at the
// test's cleanup. It needs root and iproute2's ip; New skips the test with
// the reason when they are missing, unless FASTMQ_NETLAB_REQUIRED or CI is
// set (as in CI), where it fails instead (testutil.Missing).
package netlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
)

// Lab is a switch namespace and Hosts host namespaces, each joined to the
// switch by a veth pair: host i has address 10.77.0.(i+1)/24 on its eth0.
type Lab struct {
	t      testing.TB
	prefix string
	sw     string
	hosts  []string
}

var labs atomic.Int64

// New makes a lab of n hosts (1 to 200) and removes it at t's cleanup.
func New(t testing.TB, n int) *Lab {
	t.Helper()
	if n < 1 || n > 200 {
		t.Fatalf("netlab: %d hosts", n)
	}
	if reason := unavailable(); reason != "" {
		testutil.Missing(t, "netlab: "+reason, "run as root with iproute2 installed (apt-get install iproute2)", "FASTMQ_NETLAB_REQUIRED")
	}
	// Names stay unique across test processes and short enough for
	// interface names (15 bytes).
	id := strconv.Itoa(os.Getpid()%100000) + "x" + strconv.FormatInt(labs.Add(1), 10)
	l := &Lab{t: t, prefix: "fmq" + id, sw: "fmq" + id + "sw"}
	t.Cleanup(l.remove)
	l.ip("netns", "add", l.sw)
	l.ip("-n", l.sw, "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.sw, "link", "set", "br0", "up")
	for i := range n {
		ns := fmt.Sprintf("%sh%d", l.prefix, i)
		l.ip("netns", "add", ns)
		l.hosts = append(l.hosts, ns)
		l.ip("-n", ns, "link", "set", "lo", "up")
		port := fmt.Sprintf("p%d", i)
		l.ip("-n", l.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		l.ip("-n", l.sw, "link", "set", port, "master", "br0")
		l.ip("-n", l.sw, "link", "set", port, "up")
		l.ip("-n", ns, "addr", "add", l.Addr(i)+"/24", "dev", "eth0")
		l.ip("-n", ns, "link", "set", "eth0", "up")
	}
	return l
}

func unavailable() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip is not installed"
	}
	return ""
}

// Addr returns host i's address.
func (l *Lab) Addr(i int) string { return "10.77.0." + strconv.Itoa(i+1) }

// Namespace returns host i's network namespace name.
func (l *Lab) Namespace(i int) string { return l.hosts[i] }

// Command returns a command that runs name with args in host i's namespace.
func (l *Lab) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.hosts[i], name}, args...)...)
}

// Partition cuts host i off the switch (link down); Heal joins it again.
func (l *Lab) Partition(i int) { l.ip("-n", l.sw, "link", "set", fmt.Sprintf("p%d", i), "down") }

// Heal undoes Partition.
func (l *Lab) Heal(i int) { l.ip("-n", l.sw, "link", "set", fmt.Sprintf("p%d", i), "up") }

func (l *Lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the namespaces (and with them the veth pairs and bridge).
func (l *Lab) remove() {
	for _, ns := range append(l.hosts, l.sw) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
			l.t.Errorf("netlab: remove namespace %s: %v: %s", ns, err, out)
		}
	}
}
