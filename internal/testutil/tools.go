package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Required reports whether a test whose tool is missing must fail instead
// of skipping: under CI (CI set, as .ci/run does) or when one of envs (a
// test family's own switch, such as FASTMQ_BROWSER_REQUIRED) is set.
func Required(envs ...string) bool {
	if os.Getenv("CI") != "" || os.Getenv("FASTMQ_TOOLS_REQUIRED") != "" {
		return true
	}
	for _, e := range envs {
		if os.Getenv(e) != "" {
			return true
		}
	}
	return false
}

// Missing ends t for a missing tool: it fails when Required(envs...),
// and skips otherwise, saying what is missing and how to install it.
func Missing(t testing.TB, what, install string, envs ...string) {
	t.Helper()
	if Required(envs...) {
		t.Fatalf("%s, and this run requires it (CI): %s", what, install)
	}
	t.Skipf("%s: %s to run this test", what, install)
}

var (
	pyMu    sync.Mutex
	pyFound = map[string]string{} // modules → the python that imports them
	pyWhy   = map[string]string{}
)

// Pyzmq returns a python3 that imports zmq and modules (Debian's
// /usr/bin/python3 with python3-zmq first; a python3 on PATH only if it
// imports them too: an image's own python3 often lacks pyzmq), or ends t
// with Missing.
func Pyzmq(t testing.TB, modules ...string) string {
	t.Helper()
	imports := strings.Join(append([]string{"zmq"}, modules...), ", ")
	pyMu.Lock()
	py, ok := pyFound[imports]
	why := pyWhy[imports]
	if !ok && why == "" {
		cands := []string{"/usr/bin/python3"}
		if p, err := exec.LookPath("python3"); err == nil && p != cands[0] {
			cands = append(cands, p)
		}
		var whys []string
		for _, c := range cands {
			out, err := exec.Command(c, "-c", "import "+imports).CombinedOutput()
			if err == nil {
				py, ok = c, true
				pyFound[imports] = c
				break
			}
			whys = append(whys, c+": "+strings.TrimSpace(string(bytes.TrimSpace(out)))+" "+err.Error())
		}
		if !ok {
			why = "no python3 imports " + imports + " (" + strings.Join(whys, "; ") + ")"
			pyWhy[imports] = why
		}
	}
	pyMu.Unlock()
	if !ok {
		Missing(t, why, "install Debian's python3-zmq (apt-get install python3-zmq)")
	}
	return py
}

// Command returns the path of the program name, or ends t with Missing.
func Command(t testing.TB, name, install string, envs ...string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" not found", install, envs...)
	}
	return p
}
