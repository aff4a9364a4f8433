package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fastmq/fastmq/socket"
)

func TestCLIKeygen(t *testing.T) {
	t.Parallel()
	lines := startCLI(t, "keygen").mustSucceed()
	if len(lines) != 2 {
		t.Fatalf("keygen printed %q", lines)
	}
	pub, err1 := socket.ParseCurveKey(lines[0])
	sec, err2 := socket.ParseCurveKey(lines[1])
	if err1 != nil || err2 != nil || socket.CurvePublicKey(sec) != pub {
		t.Fatalf("keygen printed %q: %v %v", lines, err1, err2)
	}

	dir := t.TempDir()
	name := filepath.Join(dir, "server")
	out := startCLI(t, "keygen", "--out", name).mustSucceed()
	spub, err := socket.LoadCurvePublicKey(name + ".pub")
	if err != nil || len(out) != 1 || out[0] != spub.Z85() {
		t.Fatalf("keygen --out printed %q; %v", out, err)
	}
	if _, err := socket.LoadCurveSecretKey(name + ".key"); err != nil {
		t.Fatal(err)
	}
	startCLI(t, "keygen", "--out", name).mustFail("exists")

	// A CURVE REP with an allow directory, and REQ clients.
	allow := filepath.Join(dir, "allow")
	if err := os.Mkdir(allow, 0o755); err != nil {
		t.Fatal(err)
	}
	startCLI(t, "keygen", "--out", filepath.Join(allow, "client")).mustSucceed()
	if err := os.Rename(filepath.Join(allow, "client.key"), filepath.Join(dir, "client.key")); err != nil {
		t.Fatal(err)
	}
	rep := startCLI(t, "rep", "--bind", "tcp://127.0.0.1:0", "--echo", "--count", "1", "--timeout", "15s",
		"--curve-server", name+".key", "--allow", allow)
	ep := rep.boundEndpoint()
	req := startCLI(t, "req", "--connect", ep, "--count", "1", "--timeout", "15s",
		"--curve-client", filepath.Join(dir, "client.key"), "--curve-serverkey", name+".pub")
	req.feed("secret hello")
	wantOut(t, "req", req.mustSucceed(), "secret hello")
	rep.mustSucceed()

	// A secret key others may read is refused, as ssh refuses it.
	if err := os.Chmod(name+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	startCLI(t, "rep", "--bind", "tcp://127.0.0.1:0", "--curve-server", name+".key").mustFail("readable by others")
}
