package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/fakellm"
)

// tokenStore is a store of token budgets that reserves and settles as
// the stores do: a Reserve limit admits while it has anything left and
// spends its cost or what remains; Settle replaces that with what was
// used. Other limits admit. It records every settlement.
type tokenStore struct {
	mu      sync.Mutex // guards the fields below
	used    map[string]int64
	settled []int64 // each settlement's used
}

func newTokenStore() *tokenStore { return &tokenStore{used: map[string]int64{}} }

func (s *tokenStore) Allow(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := domain.Verdict{Allowed: true, Outcome: domain.OutcomeAllowed, Decisions: make([]domain.Decision, len(req.Limits))}
	for i, l := range req.Limits {
		d := domain.Decision{Allowed: true, Limit: l.Rule.Limit, Remaining: l.Rule.Limit, ResetAfter: time.Minute, Shadow: l.Shadow}
		if l.Reserve {
			left := l.Rule.Limit - s.used[l.Key]
			d.Allowed = left > 0
			if d.Allowed {
				d.Spent, d.Mark = min(l.Cost, left), 1
			} else {
				d.RetryAfter = time.Minute
			}
			d.Remaining = max(left-d.Spent, 0)
		}
		v.Decisions[i] = d
		v.Allowed = v.Allowed && d.Allowed
	}
	if !v.Allowed {
		v.Outcome = domain.OutcomeDenied
		for i := range v.Decisions {
			v.Decisions[i].Spent, v.Decisions[i].Mark = 0, 0
		}
		return v, nil
	}
	for i, l := range req.Limits {
		s.used[l.Key] += v.Decisions[i].Spent
		if l.Concurrency {
			v.Release = func() {} // a slot the face holds until the exchange ends
		}
	}
	return v, nil
}

func (s *tokenStore) Settle(_ context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range req.Limits {
		if l.Reserve {
			s.used[l.Key] = max(s.used[l.Key]+used-adm[i].Spent, 0)
		}
	}
	s.settled = append(s.settled, used)
	return nil
}

// spent returns what the tenant has spent of the tpm limit, and the
// settlements so far.
func (s *tokenStore) spent() (int64, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, v := range s.used {
		if strings.Contains(k, "tpm") {
			n += v
		}
	}
	return n, append([]int64(nil), s.settled...)
}

// tokenGateway is the proxy face in front of llm, on a policy of one
// token limit "tpm" of budget tokens a minute, the route "chat"
// (/v1/chat/completions, OpenAI usage, reserve 100), "render"
// (/v1/render, the header X-Usage-Units) and, with slots, a concurrency
// limit on every route; with shadow, tpm is in shadow mode.
func tokenGateway(t *testing.T, llm http.Handler, budget int64, slots bool, shadow ...bool) (string, *tokenStore) {
	t.Helper()
	limits := []domain.PolicyLimit{{Name: "tpm", Rule: domain.Rule{Limit: budget, Window: time.Minute}, Tokens: true, Shadow: len(shadow) > 0 && shadow[0]}}
	if slots {
		rule, err := domain.ConcurrencyRule(10)
		if err != nil {
			t.Fatal(err)
		}
		limits = append(limits, domain.PolicyLimit{Name: "inflight", Rule: rule, Concurrency: true})
	}
	policy, err := domain.NewPolicy(limits, []domain.Route{
		{Name: "chat", Method: "POST", Path: "/v1/chat/completions", Cost: 1, Tokens: "openai", Reserve: 100},
		{Name: "render", Path: "/v1/render", Cost: 1, Tokens: "header:X-Usage-Units"},
	})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(llm)
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	store := newTokenStore()
	e := engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine:    e,
		Upstream:  proxy.NewUpstream(target, proxy.UpstreamOptions{}),
		Describer: httpface.Describer{TenantHeader: "X-Tenant-ID"},
	}))
	t.Cleanup(gw.Close)
	return gw.URL, store
}

// post sends body to the gateway's path as tenant acme, with the
// header pairs given, and returns the answer's status and body.
func post(t *testing.T, gw, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-ID", "acme")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// waitSettled waits for n settlements: the gateway settles once the
// upstream's exchange is over, which may be just after the client has
// its answer.
func waitSettled(t *testing.T, s *tokenStore, n int) []int64 {
	t.Helper()
	for range 3000 {
		if _, settled := s.spent(); len(settled) >= n {
			return settled
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, settled := s.spent()
	t.Fatalf("settlements %v, want %d", settled, n)
	return nil
}

// prompt is ⌈len(body)/4⌉, the gateway's estimate of a body's prompt.
func prompt(body string) int64 { return (int64(len(body)) + 3) / 4 }

func TestTokenRouteJSON(t *testing.T) {
	t.Parallel()
	const msgs = `"model":"m","messages":[{"role":"user","content":"hello"}]`
	lowered := `{` + msgs + `,"max_completion_tokens":5000}`
	both := `{` + msgs + `,"max_tokens":1,"max_completion_tokens":5000}`
	silent := `{` + msgs + `,"max_tokens":30}`
	// The fake answers 50 tokens, or its cap, to a prompt of 10.
	for _, tc := range []struct {
		name    string
		budget  int64
		body    string
		header  []string
		status  int
		wantMax int64  // the cap the upstream honoured; 0: not checked
		wantIn  string // in the body the upstream received
		settled int64
	}{
		{name: "usage charged", budget: 10000, body: `{` + msgs + `,"max_tokens":30}`, status: 200, wantMax: 30, settled: 40},
		{name: "a cap under the budget is kept", budget: 10000, body: `{` + msgs + `,"max_completion_tokens":1000}`, status: 200, wantMax: 1000, settled: 60},
		{name: "no cap: the reserve is the cap", budget: 10000, body: `{` + msgs + `}`, status: 200, wantMax: 100, wantIn: `"max_completion_tokens":100`, settled: 60},
		{name: "lowered to what remains", budget: 60, body: lowered, status: 200, wantMax: 60 - prompt(lowered), settled: 10 + min(50, 60-prompt(lowered))},
		{name: "max_tokens 1 beside a large cap: both capped", budget: 60, body: both, status: 200, wantMax: 1,
			wantIn: `"max_completion_tokens":` + itoa(60-prompt(both)), settled: 11},
		{name: "a 200 without usage keeps the reservation", budget: 10000, body: silent, header: []string{"X-Fake-Mode", "no-usage"}, status: 200, wantMax: 30, settled: prompt(silent) + 30},
		{name: "a 500 without usage gives it back", budget: 10000, body: silent, header: []string{"X-Fake-Mode", "error"}, status: 500, settled: 0},
		{name: "a body that is not JSON goes as it is", budget: 10000, body: `hello`, status: 400, settled: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			llm := &fakellm.Server{}
			gw, store := tokenGateway(t, llm, tc.budget, false)
			status, body, _ := post(t, gw, "/v1/chat/completions", tc.body, tc.header...)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, body, tc.status)
			}
			if got, ok := llm.Last(); ok {
				if tc.wantMax != 0 && got.Max != tc.wantMax {
					t.Errorf("the upstream's cap %d (%s), want %d", got.Max, got.Body, tc.wantMax)
				}
				if !strings.Contains(string(got.Body), tc.wantIn) {
					t.Errorf("the upstream got %s, want %s in it", got.Body, tc.wantIn)
				}
				if got.Header.Get("Accept-Encoding") != "identity" {
					t.Errorf("Accept-Encoding %q upstream, want identity", got.Header.Get("Accept-Encoding"))
				}
			} else if tc.status == 200 {
				t.Fatal("the upstream got nothing")
			}
			settled := waitSettled(t, store, 1)
			if len(settled) != 1 || settled[0] != tc.settled {
				t.Errorf("settlements %v, want [%d]", settled, tc.settled)
			}
			if spent, _ := store.spent(); spent != tc.settled {
				t.Errorf("spent %d, want %d", spent, tc.settled)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// events reads an event stream's data lines.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, v)
		}
	}
	return data
}

func TestTokenRouteStream(t *testing.T) {
	t.Parallel()
	const msgs = `"model":"m","messages":[{"role":"user","content":"hello"}]`
	for _, tc := range []struct {
		name      string
		body      string
		mode      string
		wantUsage bool // the client gets the usage event
		settled   int64
	}{
		{name: "usage not asked: stripped", body: `{` + msgs + `,"stream":true,"max_tokens":5}`, settled: 15},
		{name: "usage asked: kept", body: `{` + msgs + `,"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`, wantUsage: true, settled: 15},
		{name: "cut halfway: the reservation kept", body: `{` + msgs + `,"stream":true,"max_tokens":6}`, mode: "cut",
			settled: prompt(`{`+msgs+`,"stream":true,"max_tokens":6}`) + 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			llm := &fakellm.Server{}
			gw, store := tokenGateway(t, llm, 10000, false)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, gw+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("X-Tenant-ID", "acme")
			req.Header.Set("X-Fake-Mode", tc.mode)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			data := events(t, resp.Body)
			usage := 0
			for _, d := range data {
				var chunk struct {
					Choices []json.RawMessage `json:"choices"`
					Usage   json.RawMessage   `json:"usage"`
				}
				if d != "[DONE]" && json.Unmarshal([]byte(d), &chunk) == nil && len(chunk.Choices) == 0 {
					usage++
				}
			}
			if got, ok := llm.Last(); !ok || !strings.Contains(string(got.Body), `"include_usage":true`) {
				t.Errorf("the upstream got %s, want include_usage", got.Body)
			}
			switch {
			case tc.mode == "cut":
				if len(data) == 0 || data[len(data)-1] == "[DONE]" {
					t.Errorf("a cut stream relayed %q", data)
				}
			case data[len(data)-1] != "[DONE]":
				t.Errorf("the stream ends with %q, want [DONE]", data[len(data)-1])
			case (usage == 1) != tc.wantUsage || usage > 1:
				t.Errorf("%d usage events reached the client: %q", usage, data)
			}
			if settled := waitSettled(t, store, 1); len(settled) != 1 || settled[0] != tc.settled {
				t.Errorf("settlements %v, want [%d]", settled, tc.settled)
			}
		})
	}
}

// TestTokenRouteClientGone: a client that leaves mid-stream. With a
// concurrency slot the gateway reads the answer to its end, through the
// meter: the usage reported is settled. Without one the upstream's
// request is canceled, and the 200 that reported nothing keeps the
// reservation.
func TestTokenRouteClientGone(t *testing.T) {
	t.Parallel()
	body := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":20}`
	for _, slots := range []bool{true, false} {
		llm := &fakellm.Server{Gap: 5 * time.Millisecond}
		gw, store := tokenGateway(t, llm, 10000, slots)
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Tenant-ID", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		want := prompt(body) + 20
		if slots {
			want = 10 + 20
		}
		if settled := waitSettled(t, store, 1); len(settled) != 1 || settled[0] != want {
			t.Errorf("slots %v: settlements %v, want [%d]", slots, settled, want)
		}
	}
}

func TestTokenRouteRefused(t *testing.T) {
	t.Parallel()
	msgs := `"messages":[{"role":"user","content":"hello"}]`
	huge := `{` + msgs + `,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, tc := range []struct {
		name   string
		budget int64
		body   string
		status int
		want   string
	}{
		{name: "max_tokens -1", budget: 10000, body: `{` + msgs + `,"max_tokens":-1}`, status: 400, want: "max_tokens must be a positive integer"},
		{name: "max_tokens a string", budget: 10000, body: `{` + msgs + `,"max_tokens":"9"}`, status: 400, want: "max_tokens must be a positive integer"},
		{name: "max_tokens a float", budget: 10000, body: `{` + msgs + `,"max_tokens":9.5}`, status: 400, want: "max_tokens must be a positive integer"},
		{name: "stream a string", budget: 10000, body: `{` + msgs + `,"stream":"yes"}`, status: 400, want: "stream must be a boolean"},
		{name: "over 1 MiB", budget: 10000, body: huge, status: 413, want: "at most 1 MiB"},
		{name: "a prompt larger than the budget", budget: 10, body: `{` + msgs + `,"max_tokens":1}`, status: 429, want: "rate limit exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			llm := &fakellm.Server{}
			gw, store := tokenGateway(t, llm, tc.budget, false)
			status, body, h := post(t, gw, "/v1/chat/completions", tc.body, "Accept", "application/json")
			// OpenAI's error shape, which its SDKs read.
			var e struct {
				Error struct{ Message, Type string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || status != tc.status || !strings.Contains(e.Error.Message, tc.want) || e.Error.Type == "" {
				t.Fatalf("%d %q, want %d and an OpenAI error saying %q", status, body, tc.status, tc.want)
			}
			if _, text, _ := post(t, gw, "/v1/chat/completions", tc.body); !strings.HasPrefix(text, tc.want) && tc.status != 413 {
				t.Errorf("in plain text: %q, want %q", text, tc.want)
			}
			if status == 429 && h.Get("Retry-After") == "" {
				t.Errorf("a 429 without Retry-After")
			}
			if n := len(llm.Requests()); n != 0 {
				t.Errorf("the upstream got %d requests", n)
			}
			// A request denied for its prompt gave its reservation back
			// at once: a settlement of 0.
			spent, settled := store.spent()
			for _, s := range settled {
				if s != 0 || status != 429 {
					t.Errorf("settlements %v; want none, or 0 for a request denied for its prompt", settled)
				}
			}
			if spent != 0 {
				t.Errorf("spent %d, want 0", spent)
			}
		})
	}
}

func TestTokenRouteBudgetDenies(t *testing.T) {
	t.Parallel()
	llm := &fakellm.Server{}
	gw, store := tokenGateway(t, llm, 100, false)
	body := `{"messages":[],"max_tokens":50}` // a prompt of 8 by its estimate, 10 by the fake's count
	// The first reserves 58 and uses 60; the second finds 40 left, is
	// capped at 40 - 8 = 32 and uses 42; the third finds nothing left.
	for i, want := range []struct {
		status int
		cap    int64
	}{{200, 50}, {200, 32}, {429, 0}} {
		if status, b, _ := post(t, gw, "/v1/chat/completions", body); status != want.status {
			t.Fatalf("request %d: %d %s, want %d", i, status, b, want.status)
		}
		if want.status == 200 {
			waitSettled(t, store, i+1)
			if got, _ := llm.Last(); got.Max != want.cap {
				t.Errorf("request %d: the upstream's cap %d, want %d", i, got.Max, want.cap)
			}
		}
	}
	// Past the budget by what the prompt's estimate missed, no more.
	if spent, _ := store.spent(); spent != 102 {
		t.Errorf("spent %d, want 102", spent)
	}
}

func TestTokenRouteHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		write   func(w http.ResponseWriter)
		settled int64
	}{
		{name: "header", settled: 42, write: func(w http.ResponseWriter) {
			w.Header().Set("X-Usage-Units", "42")
			io.WriteString(w, "rendered")
		}},
		{name: "trailer", settled: 7, write: func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Usage-Units")
			io.WriteString(w, "rendered")
			w.Header().Set("X-Usage-Units", "7")
		}},
		{name: "negative: the reservation (the default 1024) kept", settled: 1024, write: func(w http.ResponseWriter) {
			w.Header().Set("X-Usage-Units", "-5")
			io.WriteString(w, "rendered")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []byte
			gw, store := tokenGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				tc.write(w)
			}), 10000, false)
			body := `{"max_tokens":-1}` // not read: a header route's body is the upstream's
			if status, b, _ := post(t, gw, "/v1/render", body); status != 200 || b != "rendered" {
				t.Fatalf("%d %q", status, b)
			}
			if string(got) != body {
				t.Errorf("the upstream got %q, want %q", got, body)
			}
			if settled := waitSettled(t, store, 1); settled[0] != tc.settled {
				t.Errorf("settlements %v, want [%d]", settled, tc.settled)
			}
		})
	}
}

// TestTokenRouteShadow: a shadow token limit never caps an answer, and
// still counts what it used: the stream's usage is asked for.
func TestTokenRouteShadow(t *testing.T) {
	t.Parallel()
	llm := &fakellm.Server{}
	gw, store := tokenGateway(t, llm, 60, false, true)
	body := `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":5000,"stream":true}`
	if status, b, _ := post(t, gw, "/v1/chat/completions", body); status != 200 || strings.Contains(b, `"choices":[]`) {
		t.Fatalf("%d %s", status, b)
	}
	if got, _ := llm.Last(); got.Max != 5000 || !strings.Contains(string(got.Body), `"include_usage":true`) {
		t.Errorf("the upstream got %s: want the cap of 5000 kept, and usage asked", got.Body)
	}
	if settled := waitSettled(t, store, 1); settled[0] != 60 {
		t.Errorf("settlements %v, want [60]", settled)
	}
}

// TestTokenRouteUpgrade: an upgrade on a token route is a tunnel, not
// an answer to meter: it switches, and its reservation (no usage, not a
// 2xx) is given back.
func TestTokenRouteUpgrade(t *testing.T) {
	t.Parallel()
	gw, store := tokenGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "echo")
		w.WriteHeader(http.StatusSwitchingProtocols)
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + line)
		rw.Flush()
	}), 10000, false)
	u, _ := url.Parse(gw)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /v1/render HTTP/1.1\r\nHost: x\r\nX-Tenant-ID: acme\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("%v, %v; want 101", resp, err)
	}
	io.WriteString(conn, "hi\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo hi\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	conn.Close()
	if settled := waitSettled(t, store, 1); settled[0] != 0 {
		t.Errorf("settlements %v, want [0]", settled)
	}
}

// TestTokenRouteNoAnswer: an upstream that drops the connection before
// answering: 502 in OpenAI's shape, and the reservation given back.
func TestTokenRouteNoAnswer(t *testing.T) {
	t.Parallel()
	gw, store := tokenGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}), 10000, false)
	status, body, _ := post(t, gw, "/v1/chat/completions", `{"messages":[],"max_tokens":5}`, "Accept", "application/json")
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != http.StatusBadGateway || e.Error.Message != "upstream unavailable" || e.Error.Type != "server_error" {
		t.Fatalf("%d %s, want a 502 in OpenAI's shape", status, body)
	}
	if settled := waitSettled(t, store, 1); settled[0] != 0 {
		t.Errorf("settlements %v, want [0]", settled)
	}
	if spent, _ := store.spent(); spent != 0 {
		t.Errorf("spent %d, want 0", spent)
	}
}
