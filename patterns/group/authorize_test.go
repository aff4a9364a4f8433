package group_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/socket"
)

// TestAuthorize: ServerConfig.Authorize sees each decoded request's
// stream and group; a refusal reaches a member as ErrForbidden and an
// admin call as StatusForbidden with the hook's reason, the same whether
// the stream exists or not; what it allows is served as before.
func TestAuthorize(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]bool{}
	p := newPublisherWith(t, t.TempDir(), func(c *group.ServerConfig) {
		c.Authorize = func(env [][]byte, _ group.Access, stream, grp string) error {
			mu.Lock()
			asked[stream+"/"+grp] = true
			mu.Unlock()
			if len(env) == 0 {
				return errors.New("no envelope")
			}
			if stream != "s" {
				return errors.New("not for you")
			}
			return nil
		}
	})
	defer p.close()
	p.publish(t, "s", 3)
	p.publish(t, "secret", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	m := member(t, group.MemberConfig{}, p)
	for range 3 {
		msg, err := m.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	refused := member(t, group.MemberConfig{Stream: "secret", Group: "spy"}, p)
	if _, err := refused.Next(ctx); !errors.Is(err, group.ErrForbidden) {
		t.Fatalf("member of a refused stream: %v, want ErrForbidden", err)
	}
	for _, stream := range []string{"secret", "nosuch"} {
		_, err := group.Info(ctx, p.srv.Endpoints()[0], stream, "spy", socket.Config{})
		var se *group.StatusError
		if !errors.As(err, &se) || se.Status != group.StatusForbidden || !strings.Contains(se.Msg, "forbidden: not for you") {
			t.Fatalf("info on %s: %v, want StatusForbidden with the hook's reason", stream, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"s/g", "secret/spy", "nosuch/spy"} {
		if !asked[k] {
			t.Errorf("Authorize not asked about %s (asked %v)", k, asked)
		}
	}
}
