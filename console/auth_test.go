package console_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/console"
	"github.com/fastmq/fastmq/patterns/pull"
)

// TestConsoleRefusesBeyondLoopback: on a node with an ACL, a caller from
// beyond loopback without a token gets 401 on every route but the page
// itself; one on loopback is the anonymous client (no grant here: 403 on
// a peek, no stream in /status); a token's client gets its grants (a
// list grant: the stream's state, not its records).
func TestConsoleRefusesBeyondLoopback(t *testing.T) {
	acl, err := pull.ParseACL([]byte("fastmq-acl 2\nallow read user:reader logs\nallow list user:ops logs\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := fastmq.New(fastmq.Config{Name: "acl-node", DataDir: filepath.Join(t.TempDir(), "n"), ACL: acl})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	publishN(t, n, "logs", 0, 2)
	toks, err := console.ParseTokens([]byte("reader-token-0123456789 user:reader\nops-token-0123456789abc user:ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{Node: n, Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	do := func(path, remote, token string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = remote
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusOK && strings.HasPrefix(path, "/api/peek") && token == "" {
			t.Errorf("%s from %s: %s", path, remote, w.Body.String())
		}
		return w.Code
	}
	for _, p := range []string{"/status", "/metrics", "/api/mesh", "/api/peek?stream=logs"} {
		if code := do(p, "192.0.2.7:4000", ""); code != http.StatusUnauthorized {
			t.Errorf("%s from beyond loopback without a token: %d, want 401", p, code)
		}
	}
	if code := do("/", "192.0.2.7:4000", ""); code != http.StatusOK {
		t.Errorf("the page from beyond loopback: %d", code)
	}
	if code := do("/api/peek?stream=logs", "127.0.0.1:4000", ""); code != http.StatusForbidden {
		t.Errorf("an anonymous peek on loopback: %d, want 403", code)
	}
	if code := do("/api/peek?stream=logs", "192.0.2.7:4000", "reader-token-0123456789"); code != http.StatusOK {
		t.Errorf("the reader's peek: %d, want 200", code)
	}
	// A list grant shows the stream's state, not its records.
	if code := do("/api/peek?stream=logs", "192.0.2.7:4000", "ops-token-0123456789abc"); code != http.StatusForbidden {
		t.Errorf("a lister's peek: %d, want 403", code)
	}
	r := httptest.NewRequest(http.MethodGet, "/status", nil)
	r.RemoteAddr = "192.0.2.7:4000"
	r.Header.Set("Authorization", "Bearer ops-token-0123456789abc")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if !strings.Contains(w.Body.String(), `"name": "logs"`) {
		t.Errorf("a lister's /status lacks the stream: %s", w.Body.String())
	}
	r = httptest.NewRequest(http.MethodGet, "/status", nil)
	r.RemoteAddr = "127.0.0.1:4000"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if strings.Contains(w.Body.String(), `"name": "logs"`) {
		t.Errorf("the anonymous /status shows the stream: %s", w.Body.String())
	}
	if _, err := console.ParseTokens([]byte("short user:x\n")); err == nil {
		t.Error("a short token parsed")
	}
}
