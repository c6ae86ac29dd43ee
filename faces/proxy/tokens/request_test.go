package tokens_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy/tokens"
)

func TestAPIOf(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]tokens.API{
		"/v1/chat/completions":                     tokens.ChatCompletions,
		"/openai/deployments/gpt/chat/completions": tokens.ChatCompletions,
		"/v1/chat/completions/":                    tokens.ChatCompletions,
		"/v1/completions":                          tokens.Completions,
		"/v1/responses":                            tokens.Responses,
		"/v1/embeddings":                           tokens.Other,
		"/v1/chat/completions/x":                   tokens.Other,
		"/v1/chatcompletions":                      tokens.Other,
		"":                                         tokens.Other,
	} {
		if got := tokens.APIOf(path); got != want {
			t.Errorf("APIOf(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	chat := func(q tokens.Request) tokens.Request {
		q.JSON, q.API = true, tokens.ChatCompletions
		if q.Choices == 0 {
			q.Choices = 1
		}
		return q
	}
	for _, tc := range []struct {
		name string
		api  tokens.API
		body string
		want tokens.Request // Prompt is checked apart
		bad  string         // the *BadRequest's field, when refused
	}{
		{name: "no cap", body: `{"model":"m","messages":[]}`, want: chat(tokens.Request{})},
		{name: "max_tokens", body: `{"max_tokens":100}`, want: chat(tokens.Request{Max: 100})},
		{name: "max_completion_tokens", body: `{"max_completion_tokens":7}`, want: chat(tokens.Request{Max: 7})},
		{name: "the larger of both", body: `{"max_tokens":1,"max_completion_tokens":10000}`, want: chat(tokens.Request{Max: 10000})},
		{name: "the larger, other order", body: `{"max_completion_tokens":1,"max_tokens":10000}`, want: chat(tokens.Request{Max: 10000})},
		{name: "responses cap", api: tokens.Responses, body: `{"max_output_tokens":50}`, want: tokens.Request{JSON: true, API: tokens.Responses, Choices: 1, Max: 50}},
		{name: "null is absent", body: `{"max_tokens":null,"stream":null,"stream_options":null}`, want: chat(tokens.Request{})},
		{name: "huge", body: `{"max_tokens":1000000000000}`, want: chat(tokens.Request{Max: 1_000_000_000_000})},
		{name: "past Huge", body: `{"max_tokens":1000000000000000000000000000000}`, want: chat(tokens.Request{Max: tokens.Huge})},
		{name: "n", body: `{"max_tokens":10,"n":3}`, want: chat(tokens.Request{Max: 10, Choices: 3})},
		{name: "best_of over n", api: tokens.Completions, body: `{"max_tokens":10,"n":2,"best_of":5}`, want: tokens.Request{JSON: true, API: tokens.Completions, Max: 10, Choices: 5}},
		{name: "stream", body: `{"stream":true}`, want: chat(tokens.Request{Stream: true})},
		{name: "stream with usage", body: `{"stream":true,"stream_options":{"include_usage":true}}`, want: chat(tokens.Request{Stream: true, IncludeUsage: true})},
		{name: "stream_options empty", body: `{"stream":false,"stream_options":{}}`, want: chat(tokens.Request{})},
		{name: "duplicate: the last", body: `{"max_tokens":100000,"max_tokens":1}`, want: chat(tokens.Request{Max: 1})},
		{name: "byte order mark", body: "\xef\xbb\xbf{\"max_tokens\":5}", want: chat(tokens.Request{Max: 5})},
		{name: "names in another case are other names", body: `{"MAX_TOKENS":"x","Stream":1}`, want: chat(tokens.Request{})},
		{name: "other API: no messages", api: tokens.Other, body: `{"input":"x"}`, want: tokens.Request{JSON: true, Choices: 1}},

		{name: "empty", body: ``},
		{name: "text", body: `hello`},
		{name: "array", body: `[{"max_tokens":1}]`},
		{name: "truncated", body: `{"max_tokens":1`},
		{name: "two objects", body: `{"max_tokens":1}{"max_tokens":2}`},
		{name: "trailing garbage", body: `{"max_tokens":1} x`},
		{name: "string", body: `"x"`},
		{name: "gzip", body: "\x1f\x8b\x08\x00"},

		{name: "-1", body: `{"max_tokens":-1}`, bad: "max_tokens"},
		{name: "0", body: `{"max_completion_tokens":0}`, bad: "max_completion_tokens"},
		{name: "float", body: `{"max_tokens":1.5}`, bad: "max_tokens"},
		{name: "integral float", body: `{"max_tokens":100.0}`, bad: "max_tokens"},
		{name: "exponent", body: `{"max_tokens":1e3}`, bad: "max_tokens"},
		{name: "string number", body: `{"max_tokens":"100"}`, bad: "max_tokens"},
		{name: "bool", body: `{"max_output_tokens":true}`, bad: "max_output_tokens"},
		{name: "object", body: `{"max_tokens":{}}`, bad: "max_tokens"},
		{name: "n of 0", body: `{"n":0}`, bad: "n"},
		{name: "best_of string", body: `{"best_of":"2"}`, bad: "best_of"},
		{name: "stream string", body: `{"stream":"true"}`, bad: "stream"},
		{name: "stream_options array", body: `{"stream":true,"stream_options":[]}`, bad: "stream_options"},
		{name: "include_usage 1", body: `{"stream":true,"stream_options":{"include_usage":1}}`, bad: "stream_options.include_usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := tc.api
			if api == tokens.Other && tc.name != "other API: no messages" {
				api = tokens.ChatCompletions
			}
			got, err := tokens.Parse(api, []byte(tc.body))
			if tc.bad != "" {
				var bad *tokens.BadRequest
				if !errors.As(err, &bad) || bad.Field != tc.bad {
					t.Fatalf("Parse(%s) = %+v, %v; want a BadRequest on %s", tc.body, got, err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tc.body, err)
			}
			if got.JSON {
				if want := (int64(len(tc.body)) + 3) / 4; got.Prompt != want {
					t.Errorf("Prompt = %d, want %d (⌈%d bytes ÷ 4⌉)", got.Prompt, want, len(tc.body))
				}
				got.Prompt = 0
			}
			if got != tc.want {
				t.Errorf("Parse(%s) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestParseOtherAPIWithMessagesIsChat(t *testing.T) {
	t.Parallel()
	q, err := tokens.Parse(tokens.Other, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || q.API != tokens.ChatCompletions {
		t.Fatalf("Parse = %+v, %v; want the chat API", q, err)
	}
}

func TestUnitsLeastAllowance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q                 tokens.Request
		answer            int64 // the route's default allowance
		units, least      int64
		reserved, allowed int64
	}{
		{q: tokens.Request{}, answer: 1024, units: 0, least: 0},
		{q: tokens.Request{JSON: true, Choices: 1, Prompt: 10}, answer: 1024, units: 1034, least: 11, reserved: 1034, allowed: 1024},
		{q: tokens.Request{JSON: true, Choices: 1, Prompt: 10, Max: 100}, answer: 1024, units: 110, least: 11, reserved: 60, allowed: 50},
		{q: tokens.Request{JSON: true, Choices: 3, Prompt: 10, Max: 100}, answer: 1024, units: 310, least: 13, reserved: 40, allowed: 10},
		{q: tokens.Request{JSON: true, Choices: 3, Prompt: 10}, answer: 1024, units: 1034, least: 13, reserved: 13, allowed: 1},
		{q: tokens.Request{JSON: true, Choices: 1, Prompt: 10, Max: tokens.Huge}, answer: 1024, units: tokens.Huge, least: 11, reserved: 11, allowed: 1},
		{q: tokens.Request{JSON: true, Choices: tokens.Huge, Prompt: 10, Max: tokens.Huge}, answer: 1024, units: tokens.Huge, least: tokens.Huge, reserved: tokens.Huge, allowed: 1},
		{q: tokens.Request{JSON: true, Choices: 1, Prompt: 10}, answer: 0, units: 11, least: 11, reserved: 11, allowed: 1},
	} {
		if got := tc.q.Units(tc.answer); got != tc.units {
			t.Errorf("%+v.Units(%d) = %d, want %d", tc.q, tc.answer, got, tc.units)
		}
		if got := tc.q.Least(); got != tc.least {
			t.Errorf("%+v.Least() = %d, want %d", tc.q, got, tc.least)
		}
		if tc.reserved > 0 {
			if got := tc.q.Allowance(tc.reserved); got != tc.allowed {
				t.Errorf("%+v.Allowance(%d) = %d, want %d", tc.q, tc.reserved, got, tc.allowed)
			}
		}
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	b, err := tokens.Read(strings.NewReader(strings.Repeat("x", tokens.MaxBody)))
	if err != nil || len(b) != tokens.MaxBody {
		t.Fatalf("Read of MaxBody bytes = %d bytes, %v", len(b), err)
	}
	if _, err := tokens.Read(strings.NewReader(strings.Repeat("x", tokens.MaxBody+1))); !errors.Is(err, tokens.ErrTooLarge) {
		t.Fatalf("Read of MaxBody+1 bytes: %v, want ErrTooLarge", err)
	}
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		api  tokens.API
		body string
		each int64
		want string // "" : unchanged, byte for byte
	}{
		{name: "lowered", body: `{"model":"m","max_tokens":500}`, each: 100, want: `{"model":"m","max_tokens":100}`},
		{name: "never raised", body: `{"max_tokens":50}`, each: 100},
		{name: "each field lowered", body: `{"max_tokens":1,"max_completion_tokens":10000}`, each: 100, want: `{"max_tokens":1,"max_completion_tokens":100}`},
		{name: "added for chat", body: `{"messages":[]}`, each: 100, want: `{"messages":[],"max_completion_tokens":100}`},
		{name: "null cap replaced", body: `{"max_completion_tokens":null}`, each: 100, want: `{"max_completion_tokens":100}`},
		{name: "null max_tokens: the chat cap added", body: `{"max_tokens":null}`, each: 9, want: `{"max_tokens":null,"max_completion_tokens":9}`},
		{name: "added for completions", api: tokens.Completions, body: `{"prompt":"x"}`, each: 100, want: `{"prompt":"x","max_tokens":100}`},
		{name: "added for responses", api: tokens.Responses, body: `{"input":"x"}`, each: 100, want: `{"input":"x","max_output_tokens":100}`},
		{name: "none for another API", api: tokens.Other, body: `{"input":"x"}`, each: 100},
		{name: "lowered for another API", api: tokens.Other, body: `{"input":"x","max_tokens":500}`, each: 100, want: `{"input":"x","max_tokens":100}`},
		{name: "huge", body: `{"max_tokens":1000000000000000000000000000000}`, each: 64, want: `{"max_tokens":64}`},
		{name: "stream: usage asked", body: `{"stream":true,"max_tokens":5}`, each: 100, want: `{"stream":true,"max_tokens":5,"stream_options":{"include_usage":true}}`},
		{name: "stream: other options kept", body: `{"stream":true,"max_tokens":5,"stream_options":{"x":1,"include_usage":false}}`, each: 100, want: `{"stream":true,"max_tokens":5,"stream_options":{"x":1,"include_usage":true}}`},
		{name: "stream: already asked", body: `{"stream":true,"max_tokens":5,"stream_options":{"include_usage":true}}`, each: 100},
		{name: "not a stream: no stream_options", body: `{"stream":false,"max_tokens":5}`, each: 100},
		{name: "responses stream: no stream_options", api: tokens.Responses, body: `{"stream":true,"max_output_tokens":5}`, each: 100},
		{name: "numbers, spaces and strings kept", body: `{"temperature": 0.70000000000000001, "seed": 12345678901234567890, "s": "<a&b> \u00e9", "max_tokens": 500}`, each: 100,
			want: `{"temperature":0.70000000000000001,"seed":12345678901234567890,"s":"<a&b> \u00e9","max_tokens":100}`},
		{name: "duplicates sent once", body: `{"max_tokens":1,"model":"a","max_tokens":2}`, each: 100, want: `{"max_tokens":2,"model":"a"}`},
		{name: "not JSON", body: `max_tokens=5`, each: 100},
		{name: "each 0: no cap, usage asked", body: `{"stream":true,"max_tokens":500}`, each: 0, want: `{"stream":true,"max_tokens":500,"stream_options":{"include_usage":true}}`},
		{name: "each 0: no cap added", body: `{"messages":[]}`, each: 0},
		{name: "byte order mark dropped when rewritten", body: "\xef\xbb\xbf{\"max_tokens\":500}", each: 1, want: `{"max_tokens":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := tc.api
			if api == tokens.Other && !strings.HasPrefix(tc.name, "none for") && !strings.HasPrefix(tc.name, "lowered for another") {
				api = tokens.ChatCompletions
			}
			q, err := tokens.Parse(api, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got := string(tokens.Rewrite([]byte(tc.body), q, tc.each))
			want := tc.want
			if want == "" {
				want = tc.body
			}
			if got != want {
				t.Errorf("Rewrite(%s, %d)\n got %s\nwant %s", tc.body, tc.each, got, want)
			}
		})
	}
}

// FuzzParseRewrite checks that no body panics or yields a 500's worth
// of error, and that a rewritten body reads back as the same request,
// capped at each and keeping every other member's value.
func FuzzParseRewrite(f *testing.F) {
	for _, s := range []string{
		`{"max_tokens":100,"stream":true}`, `{"max_completion_tokens":1,"max_tokens":9,"n":2}`,
		`{"stream":true,"stream_options":{"include_usage":false}}`, `{"max_tokens":-1}`, `{"max_tokens":1e3}`,
		`[]`, ``, `{"a":{"b":[1,2,{"c":"\u0000"}]}}`, "\xef\xbb\xbf{}", `{"max_tokens":99999999999999999999999}`,
	} {
		f.Add([]byte(s), int64(10))
	}
	f.Fuzz(func(t *testing.T, body []byte, each int64) {
		each = max(each%100000, 1)
		q, err := tokens.Parse(tokens.ChatCompletions, body)
		if err != nil {
			var bad *tokens.BadRequest
			if !errors.As(err, &bad) {
				t.Fatalf("Parse: %v, not a BadRequest", err)
			}
			return
		}
		out := tokens.Rewrite(body, q, each)
		if !q.JSON {
			if string(out) != string(body) {
				t.Fatalf("a body that is not JSON was changed")
			}
			return
		}
		back, err := tokens.Parse(tokens.ChatCompletions, out)
		if err != nil || !back.JSON {
			t.Fatalf("the rewritten %q reads as %+v, %v", out, back, err)
		}
		if back.Max < 1 || back.Max > max(each, q.Max) || (q.Max > 0 && back.Max > q.Max) {
			t.Fatalf("cap %d after Rewrite(each %d) of a body capped at %d", back.Max, each, q.Max)
		}
		if q.Stream && !back.IncludeUsage {
			t.Fatalf("a stream without include_usage after Rewrite: %s", out)
		}
		var before, after map[string]json.RawMessage
		if json.Unmarshal(body, &before) != nil || json.Unmarshal(out, &after) != nil {
			return // a byte order mark, or names Unmarshal folds
		}
		for k, v := range before {
			switch k {
			case "max_tokens", "max_completion_tokens", "max_output_tokens", "stream_options":
				continue
			}
			if string(v) != string(after[k]) {
				t.Fatalf("member %q was %s, is %s", k, v, after[k])
			}
		}
	})
}
