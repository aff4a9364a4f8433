package socket

import (
	"fmt"
	"testing"
)

func TestPushPull(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		pull := mk(t, Pull, Config{})
		push := mk(t, Push, Config{})
		addr := bind(t, pull, ep())
		connect(t, push, addr)
		for i := range 100 {
			mustSend(t, ctx, push, fmt.Sprint(i), "x")
		}
		for i := range 100 {
			eq(t, mustRecv(t, ctx, pull), fmt.Sprint(i), "x")
		}
	})
}

func TestDealerRouter(t *testing.T) {
	matrix(t, func(t *testing.T, ep func() string) {
		ctx := tctx(t)
		router := mk(t, Router, Config{})
		dealer := mk(t, Dealer, Config{Identity: []byte("d1")})
		addr := bind(t, router, ep())
		connect(t, dealer, addr)
		mustSend(t, ctx, dealer, "hello")
		eq(t, mustRecv(t, ctx, router), "d1", "hello")
		mustSend(t, ctx, router, "d1", "world", "2")
		eq(t, mustRecv(t, ctx, dealer), "world", "2")
	})
}
