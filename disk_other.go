//go:build !linux && !darwin

package fastmq

import "errors"

// diskSpace is not implemented on this platform.
func diskSpace(string) (total, free uint64, err error) {
	return 0, 0, errors.New("fastmq: disk space not available on this platform")
}
