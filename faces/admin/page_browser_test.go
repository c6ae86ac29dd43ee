package admin_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/app/apptest"
)

// chromium returns the path of a Chromium or Chrome, or skips the test
// without one; with TOLLGATE_REQUIRE_DOCKER=1 or TOLLGATE_REQUIRE_BROWSER=1
// (CI: scripts/test.sh installs Debian's chromium) a missing browser is
// a failure instead.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TOLLGATE_REQUIRE_DOCKER") == "1" || os.Getenv("TOLLGATE_REQUIRE_BROWSER") == "1" {
		t.Fatal("browser test: no chromium on PATH, and TOLLGATE_REQUIRE_DOCKER=1 or TOLLGATE_REQUIRE_BROWSER=1 requires it (apt-get install chromium; make test installs it)")
	}
	t.Skip("browser test: no chromium on PATH (apt-get install chromium); TOLLGATE_REQUIRE_BROWSER=1 makes this a failure")
	return ""
}

const browserToken = "0123456789abcdef0123456789abcdef"

// TestPageInABrowser drives the page at /ui/ in a real Chromium: sign in
// with the token, see a denied tenant appear at the top and on the live
// feed, click it, and read its usage. With TOLLGATE_UPDATE_SCREENSHOT=1
// it saves the page as docs/img/ui.png.
func TestPageInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	path := chromium(t)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"limits": [{"name": "per-minute", "limit": 20, "window": "1m"}],
	  "routes": [{"name": "search", "path": "/search", "limits": [{"name": "searches", "limit": 1000, "window": "1h"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := apptest.Start(t, "TOLLGATE_ADMIN_TOKEN="+browserToken, "TOLLGATE_POLICY_FILE="+policy)

	// Generous: the machine may be busy; nothing here is a timing
	// assertion but the measure logged below.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	if err := chromedp.Do(bctx,
		chromedp.Navigate(g.Admin+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token-at-all"),
		chromedp.Click(chromedp.ID("signin")),
	); err != nil {
		t.Fatalf("the sign-in form: %v", err)
	}
	refused, err := chromedp.Run(bctx, chromedp.Poll[string](`document.getElementById("login-error").textContent || null`, chromedp.WithPollingTimeout(time.Minute)))
	if err != nil || !strings.Contains(refused, "refused") {
		t.Fatalf("a wrong token: %q, %v; want it refused", refused, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("token"), browserToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("main")),
		chromedp.WaitVisible(chromedp.ID("chart")),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}

	// noisy-tenant goes over its budget of 20 a minute: 5 denials.
	for range 25 {
		send(t, g.Public+"/search", "noisy-tenant")
	}
	denied := time.Now()
	sel := `button.tenant[data-tenant="noisy-tenant"]`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('`+sel+`') !== null`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the denied tenant never appeared at the top: %v", err)
	}
	t.Logf("the denied tenant appeared at the top %s after its denials (the page reads /v1/top every second)", time.Since(denied).Round(10*time.Millisecond))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('#feed li[data-tenant="noisy-tenant"]') !== null`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the denial never appeared on the live feed: %v", err)
	}

	// More traffic, over a few seconds for the chart: globex a little
	// over its budget, initech within it.
	for round := range 4 {
		for tenant, n := range map[string]int{"noisy-tenant": 3, "globex": 6, "initech": 3} {
			for range n {
				send(t, g.Public+"/search", tenant)
			}
		}
		if round < 3 {
			time.Sleep(700 * time.Millisecond)
		}
	}
	order, err := chromedp.Run(bctx, chromedp.Poll[string](
		`(s => s === "noisy-tenant,globex" ? s : null)([...document.querySelectorAll('table[data-limit="per-minute"] button.tenant')].map(b => b.dataset.tenant).join())`,
		chromedp.WithPollingTimeout(time.Minute)))
	if err != nil {
		t.Errorf("per-minute's top: %q, %v; want noisy-tenant then globex (initech was never denied)", order, err)
	}

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking the tenant: %v", err)
	}
	remaining, err := chromedp.Run(bctx, chromedp.Poll[string](
		`(document.querySelector('#usage table[data-tenant="noisy-tenant"] tr[data-limit="per-minute"] td.remaining') || {}).textContent || null`,
		chromedp.WithPollingTimeout(time.Minute)))
	if err != nil || remaining != "0" {
		t.Fatalf("noisy-tenant's usage on click: remaining %q, %v; want 0", remaining, err)
	}
	// What the page loaded or fetched, every one from the admin listener.
	offHost, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name).filter(u => !u.startsWith(location.origin + "/"))`))
	if err != nil || len(offHost) > 0 {
		t.Errorf("the page asked another host: %v, %v", offHost, err)
	}

	if os.Getenv("TOLLGATE_UPDATE_SCREENSHOT") == "1" {
		time.Sleep(1500 * time.Millisecond) // a chart with the last seconds in it
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/img/ui.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// send sends one request as tenant; its status does not matter.
func send(t *testing.T, url, tenant string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s as %s: %v", url, tenant, err)
	}
	resp.Body.Close()
}
