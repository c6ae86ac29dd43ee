package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/internal/watch"
)

// TestOpenAPITopSchema: the schema of GET /v1/top's answer has the json
// fields of admin.TopBody, its limits', its tenants' and its seconds'.
func TestOpenAPITopSchema(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	resp := d.at(t, d.root, "", "paths", "/v1/top", "get", "responses", "200")
	schema := d.at(t, resp, "get /v1/top 200", "content", "application/json", "schema")
	checkSchema(t, d, schema, reflect.TypeFor[admin.TopBody](), "get /v1/top 200")
}

// topServer is the admin face with the top's views over a watch fed by
// hand.
func topServer(t *testing.T) (*httptest.Server, *watch.Watch, *fixture) {
	t.Helper()
	f := newFixture(t, nil, nil)
	w := watch.New(watch.Options{Top: 2})
	t.Cleanup(func() { w.Close() })
	h := admin.WithTop(f.h, admin.TopOptions{Engine: f.eng, Watch: w, Token: token, Count: func(a string) { f.actions[a]++ }})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, w, f
}

func call(t *testing.T, srv *httptest.Server, path, tok string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp, b.String()
}

// TestTopAnswers: the top names the denied tenants of each limit with
// their remaining budget (read through the engine), in the body the
// schema describes; bad windows are 400, a wrong token 401, and the
// calls of the usage API still reach it.
func TestTopAnswers(t *testing.T) {
	t.Parallel()
	srv, w, _ := topServer(t)
	v := domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{{Allowed: false}}}
	for range 3 {
		w.Watched("acme", "search", netip.Addr{}, []domain.Limit{{Name: "per-minute"}}, v)
	}
	w.Watched("a b", "search", netip.Addr{}, []domain.Limit{{Name: "per-minute"}}, v) // no usage: not a tenant id
	resp, body := call(t, srv, "/v1/top", token)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/v1/top: %d %q", resp.StatusCode, body)
	}
	var top admin.TopBody
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		t.Fatal(err)
	}
	if top.WindowSeconds != 300 || len(top.Limits) != 1 || top.Limits[0].Denied != 4 || len(top.Limits[0].Tenants) != 2 {
		t.Fatalf("/v1/top: %+v", top)
	}
	acme, odd := top.Limits[0].Tenants[0], top.Limits[0].Tenants[1]
	if acme.Tenant != "acme" || acme.Denied != 3 || acme.Remaining == nil || *acme.Remaining != 60 {
		t.Errorf("acme: %+v, want 3 denials and its 60 remaining (nothing spent in the store)", acme)
	}
	if odd.Tenant != "a b" || odd.Remaining != nil {
		t.Errorf("an unreadable tenant: %+v, want no remaining", odd)
	}
	for path, want := range map[string]int{
		"/v1/top?window=1m": 200, "/v1/top?window=5m": 200, "/v1/top?window=0s": 400, "/v1/top?window=6m": 400,
		"/v1/top?window=90s": 400, "/v1/top?window=5m&window=1m": 400, "/v1/top?windows=5m": 400, "/v1/top?%zz": 400,
		"/v1/tenants/acme/usage": 200, "/ui": 301, "/ui/": 200, "/ui/app.js": 200, "/ui/app.css": 200, "/ui/nothing.js": 404,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		c := *srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	for _, path := range []string{"/v1/top", "/v1/denials"} {
		if resp, _ := call(t, srv, path, "wrong-token-0123456789"); resp.StatusCode != 401 {
			t.Errorf("%s with a wrong token: %d, want 401", path, resp.StatusCode)
		}
	}
}

// TestDenialsFeed: the feed is an event stream of denials, and a reader
// that stops reading is cut off without holding anything up.
func TestDenialsFeed(t *testing.T) {
	t.Parallel()
	srv, w, _ := topServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/denials", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("/v1/denials: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "" { // the opening comment
	}
	v := domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{{Allowed: false}}}
	w.Watched("acme", "search", netip.MustParseAddr("2001:db8::1"), []domain.Limit{{Name: "per-minute"}}, v)
	var lines []string
	for sc.Scan() && sc.Text() != "" {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || lines[0] != "event: denial" {
		t.Fatalf("event %q", lines)
	}
	var ev watch.Event
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &ev); err != nil || ev.Tenant != "acme" || ev.Limit != "per-minute" || ev.Route != "search" || ev.Client != "2001:db8::1" {
		t.Errorf("event %+v, %v", ev, err)
	}
	// Past the rate cap, the feed says how many it dropped.
	for range 2 * watch.FeedRate {
		w.Watched("acme", "search", netip.Addr{}, []domain.Limit{{Name: "per-minute"}}, v)
	}
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: dropped") {
			sc.Scan()
			if !strings.HasPrefix(sc.Text(), `data: {"dropped":`) {
				t.Errorf("dropped event data %q", sc.Text())
			}
			return
		}
	}
	t.Fatalf("no dropped event: %v", sc.Err())
}

// TestDenialsFeedsBounded: one replica serves at most MaxFeedReaders
// feeds at once; one more is 503, and a feed that ends frees its place.
func TestDenialsFeedsBounded(t *testing.T) {
	t.Parallel()
	srv, _, _ := topServer(t)
	open := func() *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/denials", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var feeds []*http.Response
	for range admin.MaxFeedReaders {
		resp := open()
		if resp.StatusCode != 200 {
			t.Fatalf("feed %d: %d, want 200", len(feeds), resp.StatusCode)
		}
		feeds = append(feeds, resp)
	}
	resp := open()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("one feed too many: %d, want 503 with Retry-After", resp.StatusCode)
	}
	resp.Body.Close()
	feeds[0].Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := open()
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a feed closed never freed its place: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, f := range feeds[1:] {
		f.Body.Close()
	}
}
