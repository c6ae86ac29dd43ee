package apptest

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/internal/fakellm"
)

// TokenPolicy is a policy of one token limit, "tpm", 1000 tokens a
// minute per tenant, and the route "chat" (POST /v1/chat/completions)
// whose answers report OpenAI usage, reserving 100 when a request names
// no cap: the policy [CheckOpenAI] expects.
const TokenPolicy = `{
  "limits": [{"name": "tpm", "limit": 1000, "window": "1m", "meter": "tokens"}],
  "routes": [{"name": "chat", "method": "POST", "path": "/v1/chat/completions", "tokens": "openai", "reserve": 100}]
}`

// CheckOpenAI drives g, a gateway on [TokenPolicy] with tenants named by
// X-Tenant-ID in front of llm, with OpenAI's own Go client: a request's
// cap lowered to the budget, streams that end cleanly with the usage
// event removed unless the client asked for it, and a budget that denies
// with 429 once spent. Tenants are named after prefix, so that runs on
// one store do not share budgets.
func CheckOpenAI(t *testing.T, g *Gateway, llm *fakellm.Server, prefix string) {
	t.Helper()
	ctx := t.Context()
	client := func(tenant string) openai.Client {
		return openai.NewClient(
			option.WithBaseURL(g.Public+"/v1/"),
			option.WithAPIKey("sk-upstream"),
			option.WithHeader("X-Tenant-ID", prefix+tenant),
			option.WithMaxRetries(0), // a 429 is the answer under test
		)
	}
	params := func(maxTokens int64) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:               "fake",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
			MaxCompletionTokens: openai.Int(maxTokens),
		}
	}

	t.Run("cap lowered to the budget", func(t *testing.T) {
		c := client("cap")
		resp, err := c.Chat.Completions.New(ctx, params(5000), option.WithHeader("X-Fake-Answer", "5000"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := llm.Last()
		if got.Max < 1 || got.Max > 1000 {
			t.Fatalf("the upstream honoured a cap of %d, want it lowered from 5000 to under the budget of 1000 (body %s)", got.Max, got.Body)
		}
		if resp.Usage.CompletionTokens != got.Max || resp.Usage.TotalTokens > 1000+10 {
			t.Fatalf("usage %+v with a cap of %d", resp.Usage, got.Max)
		}
	})

	t.Run("stream without usage", func(t *testing.T) {
		c := client("stream")
		stream := c.Chat.Completions.NewStreaming(ctx, params(7))
		chunks := 0
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			if len(chunk.Choices) == 0 {
				t.Fatalf("chunk %d has no choices: the usage event reached a client that did not ask: %s", chunks, chunk.RawJSON())
			}
			acc.AddChunk(chunk)
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("the stream ended with %v", err)
		}
		if chunks != 7 || acc.Choices[0].Message.Content != strings.Repeat("tok ", 7) {
			t.Fatalf("%d chunks, %q", chunks, acc.Choices[0].Message.Content)
		}
		got, _ := llm.Last()
		if !strings.Contains(string(got.Body), `"include_usage":true`) {
			t.Fatalf("the upstream was not asked for usage: %s", got.Body)
		}
	})

	t.Run("stream with usage", func(t *testing.T) {
		c := client("usage")
		p := params(7)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		var usage openai.CompletionUsage
		for stream.Next() {
			if chunk := stream.Current(); len(chunk.Choices) == 0 {
				usage = chunk.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if usage.CompletionTokens != 7 || usage.TotalTokens != 17 {
			t.Fatalf("usage %+v, want 7 completion tokens, 17 in all", usage)
		}
	})

	t.Run("budget denies with 429", func(t *testing.T) {
		c := client("deny")
		served := int64(0)
		for i := range 10 {
			stream := c.Chat.Completions.NewStreaming(ctx, params(400), option.WithHeader("X-Fake-Answer", "400"))
			for stream.Next() {
			}
			err := stream.Err()
			var apiErr *openai.Error
			if errors.As(err, &apiErr) {
				if apiErr.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("request %d: %v, want a 429", i, err)
				}
				if i < 2 || served > 1000+30 {
					t.Fatalf("denied at request %d after %d tokens", i, served)
				}
				if _, err := c.Chat.Completions.New(ctx, params(10)); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
					t.Fatalf("a small request after the budget is spent: %v, want a 429", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			got, _ := llm.Last()
			served += 10 + got.Max
		}
		t.Fatalf("never denied, %d tokens served", served)
	})
}
