package discovery

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/internal/testutil"
)

const (
	childEnv     = "FASTMQ_DISCOVERY_CHILD"
	childSeedEnv = "FASTMQ_DISCOVERY_CHILD_SEED"
)

// runChild is the body of the re-executed test binary: a node that joins the
// parent, advertises a service, reports READY and waits to be killed. It
// exits on its own after a minute so an orphan never lingers.
func runChild() {
	m, err := New(Config{
		NodeName: os.Getenv(childEnv),
		Profile:  ProfileLocal,
		Seeds:    []string{os.Getenv(childSeedEnv)},
		Logger:   testLogger(),
	})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	if err := m.Advertise(Service{Name: "proc", Kind: "REP", Endpoints: []string{"tcp://127.0.0.1:9999"}}); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("READY", m.GossipAddr())
	time.Sleep(time.Minute)
	os.Exit(3)
}

func TestKilledProcessDetected(t *testing.T) {
	skipShort(t)
	parent := newNode(t, "parent", nil)
	ch, err := parent.Watch(t.Context(), "proc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=child-proc", childSeedEnv+"="+parent.GossipAddr())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "READY ") {
		t.Fatalf("child said %q, %v", line, err)
	}
	ev := waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == "child-proc" })
	if ev.Type != Added || ev.Instance.Service.Endpoints[0] != "tcp://127.0.0.1:9999" {
		t.Fatalf("got %+v", ev)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no leave
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ev = waitEvent(t, ch, waitLong, func(e Event) bool { return e.Instance.Node == "child-proc" })
	if ev.Type != Removed || ev.Reason != ReasonFailed {
		t.Fatalf("got %+v, want Removed/failed", ev)
	}
	testutil.WaitFor(t, "child failed", waitLong, func() bool { return statusOfMember(parent, "child-proc") == StatusFailed })
	if got := parent.Lookup("proc"); len(got) != 0 {
		t.Fatalf("Lookup after kill = %+v", got)
	}
}
