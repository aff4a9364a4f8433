//go:build !unix

package main

import (
	"context"
	"os/exec"
	"time"
)

// shellCommand returns `/bin/sh -c line`, killed when ctx ends or grace
// after (no process groups here: the shell's children may outlive it).
func shellCommand(ctx context.Context, line string, grace time.Duration) *exec.Cmd {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	c.WaitDelay = grace
	return c
}

// reap does nothing where there are no process groups.
func reap(ctx context.Context, c *exec.Cmd, grace time.Duration) {}
