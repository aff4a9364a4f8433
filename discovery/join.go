package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Join contacts the seeds ("host:port" gossip addresses). It retries rounds
// over all seeds with backoff until at least one answers, ctx ends, or — when
// ctx has no deadline — Config.JoinTimeout elapses. It returns the number of
// seeds contacted. The error wraps ErrJoin, and also ErrWrongKey when the
// failure looks like an encryption key mismatch (then it does not retry).
// A round can outlast ctx by up to the profile's TCP timeout (1 s
// ProfileLocal, 10 s ProfileLAN) per unreachable seed.
func (m *Membership) Join(ctx context.Context, seeds ...string) (int, error) {
	if len(seeds) == 0 {
		return 0, fmt.Errorf("%w: no seeds to join", ErrInvalid)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.set.cfg.JoinTimeout)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	for {
		if m.isClosed() {
			return 0, ErrClosed
		}
		n, err := m.serf.Join(seeds, true)
		if n > 0 {
			m.log.Info("joined cluster", slog.Int("contacted", n), slog.Any("seeds", seeds))
			return n, nil
		}
		if m.isClosed() {
			return 0, ErrClosed
		}
		err = flatten(err)
		if looksLikeKeyMismatch(err) {
			return 0, fmt.Errorf("%w: seeds %v: %w: %v", ErrJoin, seeds, ErrWrongKey, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: seeds %v: %v (%v)", ErrJoin, seeds, err, context.Cause(ctx))
		case <-m.closing:
			t.Stop()
			return 0, ErrClosed
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// flatten turns serf's multi-line multierror into one line.
func flatten(err error) error {
	var me interface{ WrappedErrors() []error }
	if err == nil || !errors.As(err, &me) {
		return err
	}
	parts := make([]string, 0, len(me.WrappedErrors()))
	for _, e := range me.WrappedErrors() {
		parts = append(parts, e.Error())
	}
	return errors.New(strings.Join(parts, "; "))
}

// looksLikeKeyMismatch recognises memberlist's errors when the two sides do
// not share a key.
func looksLikeKeyMismatch(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	for _, frag := range []string{"decrypt", "encryption", "no installed keys", "encrypted", "not encrypted"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

func (m *Membership) retryJoin(seeds []string) {
	defer m.wg.Done()
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(m.ctx, m.set.cfg.JoinTimeout)
		_, err := m.Join(ctx, seeds...)
		cancel()
		if err == nil {
			if err := m.checkName(); err != nil && !errors.Is(err, ErrClosed) {
				// Nobody waits for this join to report to: stop claiming
				// the name, and say why.
				m.log.Error("node name taken, gossip stopped", slog.Any("err", err))
				m.mu.Lock()
				m.nameErr = err
				close(m.stopped)
				m.mu.Unlock()
				if err := m.serf.Shutdown(); err != nil {
					m.log.Warn("shut down gossip", slog.Any("err", err))
				}
			}
			return
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		m.log.Warn("join failed, retrying", slog.Any("seeds", seeds), slog.Any("err", err), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-m.closing:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}
