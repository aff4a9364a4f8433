package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIHTTPObeysACL attacks a publisher's HTTP side as an outsider
// would, with plain HTTP requests: on a node whose spool port has an
// ACL, a peek without a token (even on loopback), with an unknown token,
// or for a stream the token's client may not read is refused, dead
// letters included; /status and /metrics show no stream the caller may
// not read; a reader's token peeks at its stream; and the node refuses to
// serve HTTP beyond loopback with an ACL and no tokens.
func TestCLIHTTPObeysACL(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	acl := filepath.Join(dir, "acl")
	tokens := filepath.Join(dir, "tokens")
	const readerToken = "reader-token-0123456789abcdef"
	if err := os.WriteFile(acl, []byte("fastmq-acl 1\nallow user:reader logs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte("# who may call\n"+readerToken+" user:reader\nops-token-0123456789abcdef user:ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g1, h1 := freePort(t), freePort(t)
	pub := startCLI(t, "publish", "--name", "p1", "--data", filepath.Join(dir, "p1"), "--gossip", g1, "--stream", "logs", "--ack",
		"--acl", acl, "--http", h1, "--http-tokens", tokens)
	for i := 0; i < 3; i++ {
		pub.feed("secret-line")
		pub.line()
	}
	get := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+h1+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/api/peek?stream=logs&from=0", "", http.StatusForbidden},
		{"/api/peek?stream=logs.g.dlq&from=0", "", http.StatusForbidden},
		{"/api/peek?stream=nosuch&from=0", "", http.StatusForbidden},
		{"/api/peek?stream=logs&from=0", "wrong-token-0123456789abcdef", http.StatusUnauthorized},
		{"/api/peek?stream=logs&from=0", "ops-token-0123456789abcdef", http.StatusForbidden},
		{"/api/peek?stream=logs.g.dlq&from=0", "ops-token-0123456789abcdef", http.StatusForbidden},
		{"/status", "wrong-token-0123456789abcdef", http.StatusUnauthorized},
		{"/api/peek?stream=logs&from=0", readerToken, http.StatusOK},
	} {
		code, body := get(c.path, c.token)
		if code != c.code {
			t.Errorf("GET %s with token %q: %d, want %d: %s", c.path, c.token, code, c.code, body)
		}
		if code != http.StatusOK && strings.Contains(body, "secret-line") {
			t.Errorf("GET %s with token %q leaked a record: %s", c.path, c.token, body)
		}
	}
	if _, body := get("/api/peek?stream=logs&from=0", readerToken); strings.Count(body, "secret-line") != 3 {
		t.Errorf("the reader's peek: %s", body)
	}
	// What the anonymous caller and the reader see of the node.
	for token, want := range map[string]bool{"": false, readerToken: true} {
		_, body := get("/status", token)
		var st struct {
			Streams []struct{ Name string } `json:"streams"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if got := len(st.Streams) == 1 && st.Streams[0].Name == "logs"; got != want || (!want && len(st.Streams) != 0) {
			t.Errorf("/status with token %q lists streams %+v", token, st.Streams)
		}
		_, m := get("/metrics", token)
		if got := strings.Contains(m, `stream="logs"`); got != want {
			t.Errorf("/metrics with token %q has the logs stream: %v", token, got)
		}
		_, mesh := get("/api/mesh", token)
		if got := strings.Contains(mesh, `"name":"logs"`); got != want {
			t.Errorf("/api/mesh with token %q lists the logs stream: %v", token, got)
		}
	}

	// An ACL and HTTP beyond loopback without tokens: refused at start.
	startCLI(t, "publish", "--name", "p2", "--data", filepath.Join(dir, "p2"), "--gossip", freePort(t), "--stream", "logs",
		"--acl", acl, "--http", "0.0.0.0:0").mustFail("--http-tokens")
}
