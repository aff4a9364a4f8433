//go:build unix

package main

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// shellCommand returns `/bin/sh -c line` in a process group of its own.
// When ctx ends, the whole group gets SIGTERM (the shell and what it
// started, not the shell alone), and the shell is killed if it has not
// exited grace later; call reap after Run to kill what is left of the
// group then.
func shellCommand(ctx context.Context, line string, grace time.Duration) *exec.Cmd {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = grace
	return c
}

// reap kills what is left of c's process group once c was stopped by the
// end of its ctx: the children of the shell that outlived it.
func reap(ctx context.Context, c *exec.Cmd) {
	if ctx.Err() != nil && c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}
