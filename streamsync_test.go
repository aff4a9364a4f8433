package fastmq_test

import (
	"testing"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/spool/spooltest"
)

// TestStreamSyncPacing: a node's streams pace their fdatasyncs at
// StreamSyncInterval by default: however fast the appends come, the
// fsyncs start at least that far apart.
func TestStreamSyncPacing(t *testing.T) {
	n := newNode(t, "paced")
	l, err := n.Stream("s")
	if err != nil {
		t.Fatal(err)
	}
	spooltest.CheckSyncPacing(t, l, fastmq.StreamSyncInterval)
}
