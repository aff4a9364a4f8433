package socket

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestCurveServerKeyFor: one socket connects to CURVE servers with
// different keys (which accept only the client's key, so a message that
// arrives came over CURVE), each with the key CurveServerKeyFor gives for its
// endpoint, and to a NULL server with the zero key; an endpoint the hook
// refuses is never dialled (the server sees no connection) and the refusal
// comes as EventConnectRetried with the hook's error.
func TestCurveServerKeyFor(t *testing.T) {
	ctx := tctx(t)
	cpub, csec := mustKeys(t)
	keys := map[string]CurveKey{}
	var mu sync.Mutex
	var servers []*Socket
	var eps []string
	for range 2 {
		spub, ssec := mustKeys(t)
		rep := mk(t, Rep, Config{CurveServer: true, CurveSecretKey: ssec, Authenticator: AllowCurveKeys(cpub)})
		ep := bind(t, rep, "tcp://127.0.0.1:0")
		mu.Lock()
		keys[ep] = spub
		mu.Unlock()
		servers = append(servers, rep)
		eps = append(eps, ep)
	}
	null := mk(t, Rep, Config{})
	nullEP := bind(t, null, "tcp://127.0.0.1:0")
	refused := mk(t, Rep, Config{})
	refusedEP := bind(t, refused, "tcp://127.0.0.1:0")
	errNoKey := errors.New("no key for this peer")
	hook := func(ep string) (CurveKey, error) {
		mu.Lock()
		defer mu.Unlock()
		switch ep {
		case nullEP:
			return CurveKey{}, nil
		case refusedEP:
			return CurveKey{}, fmt.Errorf("peer at %s: %w", ep, errNoKey)
		}
		k, ok := keys[ep]
		if !ok {
			return CurveKey{}, fmt.Errorf("unknown endpoint %s", ep)
		}
		return k, nil
	}
	servers, eps = append(servers, null), append(eps, nullEP)
	for i, rep := range servers {
		req := mk(t, Req, Config{CurveServerKeyFor: hook, CurveSecretKey: csec})
		connect(t, req, eps[i])
		mustSend(t, ctx, req, "ping")
		if got := mustRecv(t, ctx, rep); got[0] != "ping" {
			t.Fatalf("got %q", got)
		}
	}
	req := mk(t, Req, Config{CurveServerKeyFor: hook})
	connect(t, req, refusedEP)
	e := waitEv(t, req, EventConnectRetried)
	if !errors.Is(e.Err, errNoKey) {
		t.Fatalf("refusal event %v, want the hook's error", e.Err)
	}
	if st := refused.Stats(); st.Peers != 0 || st.HandshakeFailures != 0 {
		t.Fatalf("the refused endpoint was dialled: %+v", st)
	}
	if _, err := New(Dealer, Config{CurveServerKeyFor: hook, CurveServer: true}); err == nil {
		t.Fatal("CurveServerKeyFor with CurveServer accepted")
	}
}
