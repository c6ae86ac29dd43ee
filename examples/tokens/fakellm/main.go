// Command fakellm is an OpenAI-compatible chat completions server for
// the token budget example (examples/tokens): it answers
// POST /v1/chat/completions with -answer tokens, fewer when the request
// caps them (max_completion_tokens, max_tokens), streamed one token an
// event when the request asks for a stream, and reports usage as OpenAI
// does. Put a real OpenAI-compatible server (vLLM, llama.cpp's server,
// Ollama, OpenAI itself) in its place by changing TOLLGATE_UPSTREAM_URL.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/fakellm"
)

func main() {
	addr := flag.String("addr", ":8000", "listen address")
	answer := flag.Int64("answer", 200, "tokens in an uncapped answer")
	prompt := flag.Int64("prompt", 20, "prompt tokens reported")
	gap := flag.Duration("gap", 5*time.Millisecond, "pause between two stream events")
	flag.Parse()
	srv := &http.Server{
		Addr:              *addr,
		Handler:           &fakellm.Server{Answer: *answer, Prompt: *prompt, Gap: *gap},
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("fakellm listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
