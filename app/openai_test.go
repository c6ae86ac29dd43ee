package app_test

import (
	"net/http/httptest"
	"testing"

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
