package spool

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	if os.Getenv(dedupChildEnv) != "" {
		dedupChild()
		return
	}
	goleak.VerifyTestMain(m)
}
