package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fastmq/fastmq/internal/fsutil"
)

// QuarantineDir is where Repair moves a group's damaged files:
// Dir/<stream>/quarantine/, each name followed by the repair's Unix time.
const QuarantineDir = "quarantine"

// RepairReport says what Repair did to a group's state.
type RepairReport struct {
	// Damage is what was wrong ("" when Load read the state clean: then
	// Repair changed nothing).
	Damage string `json:"damage,omitempty"`
	// Quarantined are the files moved aside (their new paths).
	Quarantined []string `json:"quarantined,omitempty"`
	// Kept tells that a state was rebuilt from what was valid: the
	// snapshot and the first Entries entries of its journal; the entries
	// after the damage are lost (Lost says so): records they settled
	// are delivered again, those they delivered come back as pending.
	Kept    bool   `json:"kept"`
	Entries int    `json:"entries"`
	Floor   uint64 `json:"floor"`
	Next    uint64 `json:"next"`
	// Lost says what is lost, for the operator.
	Lost string `json:"lost,omitempty"`
}

// Repair rebuilds the state of a group that Load refuses (run it with
// the publisher stopped): the damaged files are moved to the quarantine
// directory, then, if the snapshot is valid, the state is rebuilt from it
// and the valid entries of its journal before the damage, written as a
// new snapshot with an empty journal of the next generation. A snapshot
// that is damaged or missing leaves no state: the group waits for an
// operator's seek (the server knows it existed). A state Load reads clean
// is left alone.
func Repair(dir, stream, group string) (RepairReport, error) {
	var rep RepairReport
	_, _, err := Load(dir, stream, group)
	if err == nil {
		return rep, nil
	}
	rep.Damage = err.Error()
	stamp := fmt.Sprint(time.Now().Unix())
	qdir := filepath.Join(dir, stream, QuarantineDir)
	quarantine := func(p string) error {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			return err
		}
		to := filepath.Join(qdir, filepath.Base(p)+"."+stamp)
		if err := os.Rename(p, to); err != nil {
			return err
		}
		rep.Quarantined = append(rep.Quarantined, to)
		return fsutil.SyncDir(filepath.Dir(p))
	}
	journals := func() []string {
		ms, _ := filepath.Glob(filepath.Join(dir, stream, group+".*.journal"))
		var out []string
		for _, m := range ms {
			if rest := strings.TrimPrefix(filepath.Base(m), group+"."); len(rest) == 16+len(".journal") {
				out = append(out, m)
			}
		}
		return out
	}
	var f File
	b, rerr := os.ReadFile(Path(dir, stream, group))
	if rerr == nil {
		_, rerr = fsutil.DecodeVersionedJSON(b, FileVersion, &f)
	}
	var g *State
	if rerr == nil {
		g, rerr = FromSnapshot(stream, group, &f)
	}
	if rerr != nil {
		for _, p := range append([]string{Path(dir, stream, group)}, journals()...) {
			if err := quarantine(p); err != nil {
				return rep, err
			}
		}
		rep.Lost = "the whole state (snapshot damaged or missing): the group waits for an operator's seek"
		return rep, nil
	}
	g.Gen = f.Journal
	if f.LogEpoch != nil {
		g.Epoch, g.EpochKnown = *f.LogEpoch, true
	}
	if f.Journal != 0 {
		entries := validEntries(JournalPath(dir, stream, group, f.Journal), f.Journal)
		now := time.Now()
		for i := range entries {
			if g.Apply(&entries[i], now) != nil {
				break
			}
			rep.Entries++
		}
		rep.Lost = fmt.Sprintf("the journal's entries after the first %d (changes since: records they settled are delivered again)", rep.Entries)
	}
	for _, p := range journals() {
		if err := quarantine(p); err != nil {
			return rep, err
		}
	}
	if err := quarantine(Path(dir, stream, group)); err != nil {
		return rep, err
	}
	g.Gen++
	j, err := CreateJournal(dir, stream, group, g.Gen)
	if err != nil {
		return rep, err
	}
	j.Close()
	if err := Write(dir, g.Snapshot()); err != nil {
		return rep, err
	}
	rep.Kept, rep.Floor, rep.Next = true, g.Floor, g.Next
	return rep, nil
}

// validEntries returns the entries of a journal up to its first damage
// (none when its header is bad or the file is missing).
func validEntries(path string, gen uint64) []Entry {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < journalHdrLen || string(b[:4]) != journalMagic {
		return nil
	}
	if binary.BigEndian.Uint64(b[8:]) != gen {
		return nil
	}
	var out []Entry
	for pos := journalHdrLen; pos < len(b); {
		e, n, err := DecodeEntry(b[pos:])
		if err != nil {
			break
		}
		out = append(out, e)
		pos += n
	}
	return out
}
