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
// exited grace later; call reap after Run for the rest of the group.
func shellCommand(ctx context.Context, line string, grace time.Duration) *exec.Cmd {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = grace
	return c
}

// reap, once c was stopped by the end of its ctx, gives what is left of
// its process group (the shell's children, which got SIGTERM with it) up
// to grace to exit, then kills it.
func reap(ctx context.Context, c *exec.Cmd, grace time.Duration) {
	if ctx.Err() == nil || c.Process == nil {
		return
	}
	pg := -c.Process.Pid
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pg, 0) != nil {
			return // the group is empty
		}
	}
	_ = syscall.Kill(pg, syscall.SIGKILL)
}
