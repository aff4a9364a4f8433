// Package fsutil holds the crash-safe file operations that FastMQ's
// on-disk state (spool offsets, tailer positions, collector positions)
// shares.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces name with data crash-safely: it writes a
// temporary file in the same directory, fsyncs it, renames it over name and
// fsyncs the directory. After a crash, name holds either the old or the new
// data, never a mix; the old file is never removed before the new one is in
// place.
func WriteFileAtomic(name string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("chmod temporary file for %s: %w", name, err)
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write temporary file for %s: %w", name, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("fsync temporary file for %s: %w", name, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close temporary file for %s: %w", name, err)
	}
	if err = os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("rename %s into place: %w", name, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that creates, renames and deletes in it
// are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s for fsync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
