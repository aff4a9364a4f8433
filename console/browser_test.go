package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/internal/testutil"
	"github.com/fastmq/fastmq/patterns/group"
)

// chromiumPath finds Debian's chromium (FASTMQ_CHROMIUM overrides). The
// test skips when there is none, and fails under CI or with
// FASTMQ_BROWSER_REQUIRED set (testutil.Missing).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FASTMQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testutil.Missing(t, "chromium not found", "install Debian's chromium (apt-get install chromium)", "FASTMQ_BROWSER_REQUIRED")
	return ""
}

// artefactDir is where screenshots go: FASTMQ_ARTIFACTS, else a test
// temporary directory.
func artefactDir(t *testing.T) string {
	if d := os.Getenv("FASTMQ_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browser starts a headless chromium with a fresh profile and returns a
// context for chromedp actions; it ends with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1100),
	)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelB()
		cancelA()
	})
	// The first action starts the browser; it carries no timeout (that
	// would bound the browser's life), the steps after it do.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs actions bounded by d.
func step(t *testing.T, ctx context.Context, what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func evalString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// TestConsoleBrowser drives the console in a real headless chromium
// against a three-node mesh: the page lists the three members, a stream's
// records in the peek and a consumer's lag; when one node is killed the
// page shows it failed.
func TestConsoleBrowser(t *testing.T) {
	ctx := browser(t)
	dir := artefactDir(t)
	as := startMesh(t, "alpha", "beta", "gamma")
	alpha, beta, gamma := as[0], as[1], as[2]
	publishN(t, alpha.node, "orders", 0, 40)
	publishN(t, beta.node, "audit", 0, 5)
	c, err := beta.node.Consume(fastmq.ConsumerConfig{Stream: "orders", Name: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumeN(t, c, 40)
	// A consumer that has not read anything yet lags by every record.
	slow, err := gamma.node.Consume(fastmq.ConsumerConfig{Stream: "audit", Name: "reports"})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()

	// A consumer group on alpha's orders: three acknowledged, one
	// dead-lettered, one held in flight.
	gm, err := beta.node.Group(fastmq.GroupConfig{Stream: "orders", Group: "shipping", Member: group.MemberConfig{Buffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	gctx, gcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer gcancel()
	for i := 0; i < 5; i++ {
		msg, err := gm.Next(gctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 3:
			err = msg.Ack(gctx)
		case i == 3:
			err = msg.Term(gctx, "cannot ship")
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	step(t, ctx, "open beta's console and see three members alive", 20*time.Second,
		chromedp.Navigate(beta.url("/")),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#members tr[data-status=alive]").length === 3`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#streams tr[data-stream=orders][data-node=alpha]') !== null`),
		chromedp.Poll[chromedp.Void](`(() => { const r = document.querySelector('#consumers tr[data-consumer=billing][data-publisher=alpha]'); return r !== null && r.dataset.lag === "0"; })()`),
	)
	if got := evalString(t, ctx, `document.querySelector('#streams tr[data-stream=orders][data-node=alpha]').children[3].textContent`); got != "40" {
		t.Errorf("alpha's orders next offset on the page: %q, want 40", got)
	}
	// The group's row: lag 36 (40 less 3 acknowledged and 1
	// dead-lettered), the dead letter, a record in flight.
	const grow = `document.querySelector('#groups tr[data-group=shipping][data-stream=orders][data-publisher=alpha]')`
	step(t, ctx, "the group's numbers", 20*time.Second,
		chromedp.Poll[chromedp.Void](`(() => { const r = `+grow+`; return r !== null && r.dataset.dead === "1" && r.dataset.acked === "3"; })()`),
	)
	for i, want := range map[int]string{3: "36", 10: "3", 13: "1"} {
		if got := evalString(t, ctx, fmt.Sprintf(`%s.children[%d].textContent`, grow, i)); got != want {
			t.Errorf("group row column %d: %q, want %s", i, got, want)
		}
	}
	if got := evalString(t, ctx, grow+`.dataset.inFlight`); got == "0" || got == "" {
		t.Errorf("group row: %q in flight, want the held record", got)
	}
	// Readers, from the publisher's side: alpha's spool server saw beta's
	// consumer billing fetch at the stream's end.
	step(t, ctx, "alpha's readers", 20*time.Second,
		chromedp.Poll[chromedp.Void](`(() => { const r = document.querySelector('#readers tr[data-publisher=alpha][data-stream=orders][data-consumer=billing][data-node=beta]'); return r !== null && r.dataset.position === "40" && r.dataset.lag === "0"; })()`),
	)
	// The group's live member, and beta's group members named by stream
	// and group (not the gossip service's fastmq-group (GROUP)).
	if got := evalString(t, ctx, grow+`.children[7].dataset.active`); got != "1" {
		t.Errorf("group row: %q active members, want 1", got)
	}
	if got := evalString(t, ctx, `document.querySelector('#members tr[data-member=beta]').children[7].textContent`); !strings.Contains(got, "group member of orders/shipping") || strings.Contains(got, "GROUP") {
		t.Errorf("beta's services on the page: %q, want group member of orders/shipping", got)
	}

	// Peek: a click on the stream's row shows its first records.
	step(t, ctx, "peek at alpha's orders", 15*time.Second,
		chromedp.Click(chromedp.CSS(`#streams tr[data-stream=orders][data-node=alpha]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#peek tr[data-offset]").length === 20`),
	)
	for _, off := range []int{0, 7, 19} {
		got := evalString(t, ctx, fmt.Sprintf(`document.querySelector('#peek tr[data-offset="%d"] td.value').textContent`, off))
		if want := fmt.Sprintf("alpha-%d", off); got != want {
			t.Errorf("peek at offset %d: %q, want %q", off, got, want)
		}
	}
	step(t, ctx, "next page", 15*time.Second,
		chromedp.Click(chromedp.CSS(`#peek-next`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#peek tr[data-offset="39"]') !== null && document.querySelectorAll("#peek tr[data-offset]").length === 20`),
	)
	// By time: the first record at or after a time long past is offset 0.
	step(t, ctx, "peek by time", 15*time.Second,
		chromedp.SetValue(chromedp.CSS(`#peek-time`), "2000-01-01T00:00:00Z"),
		chromedp.SetValue(chromedp.CSS(`#peek-limit`), "5"),
		chromedp.Click(chromedp.CSS(`#peek-go`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#peek tr[data-offset]").length === 5 && document.querySelector('#peek tr[data-offset="0"]') !== null`),
	)
	step(t, ctx, "the charts drawn", 10*time.Second,
		chromedp.Poll[chromedp.Void](`document.getElementById("chart-append").toDataURL().length > 1000`),
	)
	screenshot(t, ctx, dir, "console-mesh.png")

	// Kill gamma: no leave, its HTTP server gone with it.
	gamma.srv.Close()
	gamma.node.Close()
	step(t, ctx, "gamma shown failed", 30*time.Second,
		chromedp.Poll[chromedp.Void](`document.querySelector('#members tr[data-member=gamma][data-status=failed]') !== null`),
	)
	if got := evalString(t, ctx, `document.querySelectorAll("#members tr[data-status=alive]").length.toString()`); got != "2" {
		t.Errorf("alive members after the kill: %s, want 2", got)
	}
	screenshot(t, ctx, dir, "console-failed.png")

	// Kill alpha, the publisher: its stream and group rows stay, with
	// their last known lag and since when it is down, and the header's
	// total lag still counts them.
	alpha.srv.Close()
	alpha.node.Close()
	step(t, ctx, "alpha's group kept with its last known lag", 30*time.Second,
		chromedp.Poll[chromedp.Void](`(() => { const r = `+grow+`; return r !== null && r.dataset.stale === "1"; })()`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#streams tr[data-stream=orders][data-node=alpha][data-stale="1"]') !== null`),
	)
	if got := evalString(t, ctx, grow+`.children[3].textContent`); got != "36" {
		t.Errorf("the dead publisher's group lag: %q, want 36", got)
	}
	if got := evalString(t, ctx, grow+`.children[2].textContent`); !strings.Contains(got, "publisher down since") {
		t.Errorf("the dead publisher's group row says %q, want publisher down since", got)
	}
	if got := evalString(t, ctx, `document.getElementById("summary").textContent`); strings.Contains(got, "total lag 0 ") {
		t.Errorf("summary after the publisher died: %q", got)
	}
	screenshot(t, ctx, dir, "console-publisher-down.png")

	// A publisher without HTTP (delta): its stream and its group are
	// asked of its spool server, and shown as the others'.
	delta, err := fastmq.New(fastmq.Config{Name: "delta", DataDir: filepath.Join(t.TempDir(), "delta"), Seeds: []string{beta.node.GossipAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer delta.Close()
	publishN(t, delta, "events", 0, 12)
	dm, err := beta.node.Group(fastmq.GroupConfig{Stream: "events", Group: "crm", Member: group.MemberConfig{Buffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	for i := 0; i < 2; i++ {
		msg, err := dm.Next(gctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := msg.Ack(gctx); err != nil {
			t.Fatal(err)
		}
	}
	const drow = `document.querySelector('#groups tr[data-group=crm][data-stream=events][data-publisher=delta]')`
	step(t, ctx, "delta's stream and group through its spool server", 30*time.Second,
		chromedp.Poll[chromedp.Void](`(() => { const r = document.querySelector('#streams tr[data-stream=events][data-node=delta]'); return r !== null && r.children[3].textContent === "12"; })()`),
		chromedp.Poll[chromedp.Void](`(() => { const r = `+drow+`; return r !== null && r.dataset.acked === "2"; })()`),
	)
	// delta's readers, asked of its spool server too: beta's member
	// fetches from it as a group member, and a plain consumer of beta's.
	dc, err := beta.node.Consume(fastmq.ConsumerConfig{Stream: "events", Name: "audit-trail"})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	consumeN(t, dc, 12)
	step(t, ctx, "delta's readers through its spool server", 30*time.Second,
		chromedp.Poll[chromedp.Void](`(() => { const r = document.querySelector('#readers tr[data-publisher=delta][data-stream=events][data-consumer=audit-trail][data-node=beta]'); return r !== null && r.dataset.position === "12"; })()`),
	)
	if got := evalString(t, ctx, drow+`.children[3].textContent`); got != "10" {
		t.Errorf("delta's group lag on the page: %q, want 10", got)
	}
	screenshot(t, ctx, dir, "console-via-spool.png")
}
