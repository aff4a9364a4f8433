//go:build !linux && !darwin

package diskguard

import "errors"

// Space is not implemented on this platform.
func Space(string) (total, free uint64, err error) {
	return 0, 0, errors.New("fastmq: disk space not available on this platform")
}
