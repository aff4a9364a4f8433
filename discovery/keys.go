package discovery

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/hashicorp/serf/serf"
)

// InstallKey installs key in the key ring of every member (it does not
// start using it for sending). Key operations need Config.Key; otherwise they
// return ErrNoEncryption. If any member fails or does not answer, the error
// is a *KeyError.
func (m *Membership) InstallKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "install", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.InstallKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// UseKey makes an installed key the primary (sending) key on every member.
func (m *Membership) UseKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "use", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.UseKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// RemoveKey removes a key that is not primary from every member.
func (m *Membership) RemoveKey(ctx context.Context, key []byte) error {
	_, err := m.keyOp(ctx, "remove", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.RemoveKey(base64.StdEncoding.EncodeToString(key))
	})
	return err
}

// ListKeys returns, for each key installed anywhere in the cluster (base64
// encoded), how many members hold it.
func (m *Membership) ListKeys(ctx context.Context) (map[string]int, error) {
	resp, err := m.keyOp(ctx, "list", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.ListKeys()
	})
	if resp == nil {
		return nil, err
	}
	return cloneCounts(resp.Keys), err
}

func cloneCounts(in map[string]int) map[string]int {
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// keyOp runs a serf key-ring query. serf's call cannot be cancelled, so it
// runs in an owned goroutine that Close waits for (it ends after the query
// timeout at most).
func (m *Membership) keyOp(ctx context.Context, op string, f func(*serf.KeyManager) (*serf.KeyResponse, error)) (*serf.KeyResponse, error) {
	if m.set.cfg.Key == nil {
		return nil, ErrNoEncryption
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	type result struct {
		resp *serf.KeyResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		defer m.wg.Done()
		r, err := f(m.serf.KeyManager())
		done <- result{r, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.closing:
		return nil, ErrClosed
	case r := <-done:
		if r.resp == nil {
			return nil, fmt.Errorf("discovery: key %s: %w", op, r.err)
		}
		if r.err != nil || r.resp.NumErr > 0 || r.resp.NumResp < r.resp.NumNodes {
			return r.resp, &KeyError{Op: op, NumNodes: r.resp.NumNodes, NumResp: r.resp.NumResp, NumErr: r.resp.NumErr, Messages: r.resp.Messages}
		}
		return r.resp, nil
	}
}
