// Package examples_test builds and runs the example programs, so that they
// keep working, not only compiling.
package examples_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	cases := []struct {
		dir  string
		want []string
	}{
		{"logship", []string{"web-1@0: 127.0.0.1", "web-1@4: 127.0.0.1"}},
		{"ipc", []string{"hello -> HELLO", "another process -> ANOTHER PROCESS"}},
		{"rpc", []string{"ALPHA", "DELTA"}},
	}
	bin := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			exe := filepath.Join(bin, tc.dir)
			if out, err := exec.Command("go", "build", "-o", exe, "./"+tc.dir).CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, exe).CombinedOutput()
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
