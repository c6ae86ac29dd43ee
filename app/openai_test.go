package app_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/fakellm"
)

// TestOpenAIClient runs OpenAI's Go client through a whole gateway on
// the memory store, in front of an OpenAI-compatible fake: caps lowered
// to the budget, streams with and without their usage event, and 429
// once the budget is spent.
func TestOpenAIClient(t *testing.T) {
	t.Parallel()
	llm := &fakellm.Server{}
	up := httptest.NewServer(llm)
	t.Cleanup(up.Close)
	policy := writeFile(t, "policy.json", apptest.TokenPolicy)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_UPSTREAM_URL="+up.URL)
	apptest.CheckOpenAI(t, g, llm, "mem-")
}

// TestTokensExample runs the example of examples/tokens (its policy and
// tenants) with OpenAI's Go client, the gateway's key as X-API-Key and
// the upstream's own in Authorization: a request, a stream, and the
// token limits in RateLimit-Policy.
func TestTokensExample(t *testing.T) {
	t.Parallel()
	llm := &fakellm.Server{}
	up := httptest.NewServer(llm)
	t.Cleanup(up.Close)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE=../examples/tokens/policy.json",
		"TOLLGATE_TENANTS_FILE=../examples/tokens/tenants.json", "TOLLGATE_UPSTREAM_URL="+up.URL)
	var resp *http.Response
	client := openai.NewClient(option.WithBaseURL(g.Public+"/v1/"), option.WithAPIKey("sk-upstream"),
		option.WithHeader("X-API-Key", "k-globex"), option.WithMaxRetries(0))
	c, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.TotalTokens != 60 {
		t.Errorf("usage %+v, want 60 tokens", c.Usage)
	}
	if p := resp.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"tpm";q=20000;w=60;qu="tokens"`) {
		t.Errorf("RateLimit-Policy %q, want globex's tpm of 20000 tokens", p)
	}
	got, _ := llm.Last()
	if got.Header.Get("Authorization") != "Bearer sk-upstream" || got.Header.Get("X-Api-Key") != "" || got.Header.Get("X-Tenant-Id") != "globex" {
		t.Errorf("the upstream got Authorization %q, X-API-Key %q, X-Tenant-ID %q", got.Header.Get("Authorization"),
			got.Header.Get("X-Api-Key"), got.Header.Get("X-Tenant-Id"))
	}
	if got.Max != 1024 {
		t.Errorf("the upstream's cap %d, want the route's reserve of 1024", got.Max)
	}
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	n := 0
	for stream.Next() {
		if len(stream.Current().Choices) == 0 {
			t.Fatal("a chunk without choices reached the client")
		}
		n++
	}
	if err := stream.Err(); err != nil || n != 50 {
		t.Fatalf("%d chunks, %v", n, err)
	}
}
