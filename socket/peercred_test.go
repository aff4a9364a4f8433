package socket

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// peerCredEnv names the endpoint a child process of TestPeerProcess
// connects to (TestPeerProcessChild).
const peerCredEnv = "FASTMQ_PEERCRED_ENDPOINT"

// TestPeerProcessChild is the child process of TestPeerProcess: a DEALER
// that connects, says hello and waits for the answer. Run alone (without
// the variable) it does nothing.
func TestPeerProcessChild(t *testing.T) {
	ep := os.Getenv(peerCredEnv)
	if ep == "" {
		return
	}
	d := mk(t, Dealer, Config{})
	if err := d.Connect(ep); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.Send(ctx, NewMsg([]byte("hello"))); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Recv(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPeerProcess: an Authenticator and PeerCredentials learn the peer
// process of an ipc connection as the kernel reports it (SO_PEERCRED): a
// child process's pid, and its uid and gid; inproc peers are this
// process; tcp peers have none.
func TestPeerProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SO_PEERCRED is Linux's")
	}
	var mu sync.Mutex
	var seen []*PeerProcess
	auth := AuthFunc(func(r AuthRequest) error {
		mu.Lock()
		seen = append(seen, r.Process)
		mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// serve binds a ROUTER, lets connect reach it, and returns the peer
	// process that PeerCredentials and the Authenticator report.
	serve := func(ep string, connect func(ep string)) (cred, authSaw *PeerProcess) {
		t.Helper()
		mu.Lock()
		seen = nil
		mu.Unlock()
		r := mk(t, Router, Config{Authenticator: auth})
		ep = bind(t, r, ep)
		connect(ep)
		m, err := r.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pc, ok, err := r.PeerCredentials(m.Frames[0])
		if err != nil || !ok {
			t.Fatalf("PeerCredentials: %v %v", ok, err)
		}
		if err := r.Send(ctx, NewMsg(m.Frames[0], []byte("bye"))); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 {
			t.Fatalf("the Authenticator was asked %d times", len(seen))
		}
		return pc.Process, seen[0]
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var child *exec.Cmd
	cred, authSaw := serve("ipc://"+filepath.Join(t.TempDir(), "s.sock"), func(ep string) {
		child = exec.Command(exe, "-test.run=^TestPeerProcessChild$")
		child.Env = append(os.Environ(), peerCredEnv+"="+ep)
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
	})
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	want := PeerProcess{PID: child.Process.Pid, UID: os.Getuid(), GID: os.Getgid()}
	if cred == nil || *cred != want || authSaw == nil || *authSaw != want {
		t.Fatalf("ipc peer: credentials %+v, authenticator %+v; want %+v", cred, authSaw, want)
	}

	self := PeerProcess{PID: os.Getpid(), UID: os.Getuid(), GID: os.Getgid()}
	dial := func(ep string) {
		d := mk(t, Dealer, Config{})
		if err := d.Connect(ep); err != nil {
			t.Fatal(err)
		}
		if err := d.Send(ctx, NewMsg([]byte("hello"))); err != nil {
			t.Fatal(err)
		}
	}
	if cred, authSaw := serve("inproc://peercred", dial); cred == nil || *cred != self || authSaw == nil || *authSaw != self {
		t.Fatalf("inproc peer: credentials %+v, authenticator %+v; want %+v", cred, authSaw, self)
	}
	if cred, authSaw := serve("tcp://127.0.0.1:0", dial); cred != nil || authSaw != nil {
		t.Fatalf("tcp peer: credentials %+v, authenticator %+v; want none", cred, authSaw)
	}
}
