package rpc_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/rpc"
)

// A plain libzmq REQ client (pyzmq) calls a Server as if it were REP, and
// gets handler errors as two frames.
func TestRPCInteropPyzmqREQ(t *testing.T) {
	py := testutil.Pyzmq(t)
	srv, err := rpc.NewServer(rpc.ServerConfig{Service: "svc", Handler: func(ctx context.Context, req []byte) ([]byte, error) {
		if string(req) == "fail" {
			return nil, rpc.Errorf("bad-input", "cannot do %s", req)
		}
		return []byte(strings.ToUpper(string(req))), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out, err := exec.Command(py, filepath.Join("testdata", "req.py"), srv.Endpoints()[0], "hello", "fail", "world").CombinedOutput()
	if err != nil {
		t.Fatalf("req.py: %v\n%s", err, out)
	}
	want := "HELLO\nerror:bad-input\tcannot do fail\nWORLD\n"
	if string(out) != want {
		t.Fatalf("req.py printed %q, want %q", out, want)
	}
	if st := srv.Stats(); st.Handled != 3 || st.Errors != 1 {
		t.Fatalf("server stats %+v", st)
	}
}
