package group

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/fastmq/fastmq/internal/fsutil"
	"github.com/fastmq/fastmq/patterns/group/internal/durable"
)

// A group's state damaged or gone is never silent: a state Load refuses
// is logged at ERROR (once, then again only after it loaded clean) and
// answered StatusInternal until an operator runs Repair (fastmq group
// repair); a group whose state vanished (the server wrote it once, see
// known) is not restarted from its start position, which would deliver
// again every record it had settled: it is logged at ERROR and waits for
// an operator's seek, which creates it where the operator says.

// knownVersion is the version of the known-groups file.
const knownVersion = 1

// knownFile is the file, in Dir, that lists every group the server
// wrote a state for ("stream/group"), so that a state that vanished is
// told from a group never seen.
const knownFile = "groups.known"

// known is the set of groups whose state the server wrote once.
type known struct {
	mu    sync.Mutex
	dir   string
	names map[string]bool
}

func loadKnown(dir string) *known {
	k := &known{dir: dir, names: make(map[string]bool)}
	b, err := os.ReadFile(filepath.Join(dir, knownFile))
	if err != nil {
		return k
	}
	var names []string
	if _, err := fsutil.DecodeVersionedJSON(b, knownVersion, &names); err == nil {
		for _, n := range names {
			k.names[n] = true
		}
	}
	return k
}

// has tells whether the group's state was written once.
func (k *known) has(stream, group string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.names[stream+"/"+group]
}

// add notes the group's state as written (the flusher calls it after
// writing a snapshot).
func (k *known) add(stream, group string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.names[stream+"/"+group] {
		return nil
	}
	k.names[stream+"/"+group] = true
	names := make([]string, 0, len(k.names))
	for n := range k.names {
		names = append(names, n)
	}
	sort.Strings(names)
	if err := os.MkdirAll(k.dir, 0o755); err != nil {
		return err
	}
	return fsutil.WriteVersionedJSON(filepath.Join(k.dir, knownFile), knownVersion, names, 0o644)
}

// RepairReport says what Repair did to a group's state (see Repair).
type RepairReport = durable.RepairReport

// ErrStateLost is wrapped by the answer to a fetch of a group whose
// state vanished: it waits for an operator's seek.
var ErrStateLost = errors.New("group: state lost")

// Repair rebuilds the state of a group of stream under dir (a Server's
// ServerConfig.Dir; a node's <data>/groups) that its publisher refuses as
// damaged. Run it with the publisher stopped. The damaged files are moved
// to dir/<stream>/quarantine/; if the snapshot is valid the state is
// rebuilt from it and the valid journal entries before the damage (what
// the lost entries had settled is delivered again), otherwise no state
// is left and the group waits for an operator's Seek. The report says
// what was lost. A state that loads clean is left alone (an empty
// report's Damage).
func Repair(dir, stream, group string) (RepairReport, error) {
	if !validName(stream) || !validName(group) {
		return RepairReport{}, errors.New("group: repair: bad stream or group name")
	}
	return durable.Repair(dir, stream, group)
}
