// Command llm is the token benchmark's upstream: an OpenAI-compatible
// chat completions endpoint that answers every request with as many
// tokens as it may (its -answer, lowered by the request's
// max_completion_tokens or max_tokens), streamed one token an event
// when the request asks for a stream, and that keeps the books: for each
// request, when it arrived and the tokens it reported. GET /stats?window=
// sums them over the window that starts with the first request: what a
// gateway let through in that window, whatever it charged.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"
)

type served struct {
	at     time.Time
	tokens int64
}

type books struct {
	mu   sync.Mutex
	reqs []served
}

func (b *books) add(at time.Time, tokens int64) {
	b.mu.Lock()
	b.reqs = append(b.reqs, served{at, tokens})
	b.mu.Unlock()
}

type request struct {
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "listen address")
	answer := flag.Int64("answer", 290, "completion tokens an answer has when the request allows them")
	prompt := flag.Int64("prompt", 10, "prompt tokens every request reports")
	delay := flag.Duration("delay", 2*time.Millisecond, "pause between a stream's events")
	flag.Parse()
	b := &books{}
	http.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := *answer
		for _, m := range []*int64{req.MaxTokens, req.MaxCompletionTokens} {
			if m != nil && *m < n {
				n = max(*m, 0)
			}
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, *prompt, n, *prompt+n)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}],"usage":%s}`, usage)
			b.add(at, *prompt+n)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		var sent int64
		for ; sent < n; sent++ {
			if _, err := fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x \"}}]}\n\n"); err != nil {
				break
			}
			if fl != nil {
				fl.Flush()
			}
			time.Sleep(*delay)
		}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":%s}\n\n", usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		b.add(at, *prompt+sent)
	})
	http.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		window, err := time.ParseDuration(r.URL.Query().Get("window"))
		if err != nil {
			http.Error(w, "window: want a Go duration", http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		var tokens, reqs int64
		if len(b.reqs) > 0 {
			from := b.reqs[0].at
			for _, s := range b.reqs {
				if s.at.Before(from) {
					from = s.at
				}
			}
			for _, s := range b.reqs {
				if s.at.Sub(from) < window {
					tokens += s.tokens
					reqs++
				}
			}
		}
		fmt.Fprintf(w, `{"tokens":%d,"requests":%d,"all":%d}`+"\n", tokens, reqs, len(b.reqs))
	})
	http.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		b.mu.Lock()
		b.reqs = nil
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	log.Printf("llm: listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
