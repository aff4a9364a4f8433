//go:build linux || darwin

package diskguard

import "syscall"

// Space returns the size of the file system holding path and the bytes
// available on it to this process's user.
func Space(path string) (total, free uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return uint64(st.Blocks) * bs, uint64(st.Bavail) * bs, nil
}
