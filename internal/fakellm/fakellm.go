// Package fakellm is an OpenAI-compatible chat completions server for
// tests and examples: it answers /v1/chat/completions (and
// /chat/completions) with a given number of tokens, fewer when the
// request caps them, streamed one token an event when the request asks
// for a stream, and reports usage as OpenAI does: in the answer, or in a
// last stream event with "choices": [] only when the request asks for it
// (stream_options.include_usage). It keeps every request it received.
//
// A request header picks a misbehaviour, for the gateway's tests:
//
//	X-Fake-Mode: no-usage   a 200 that reports no usage
//	X-Fake-Mode: error      a 500 that reports no usage
//	X-Fake-Mode: cut        a stream whose connection closes halfway
//	X-Fake-Usage-Header: H  the total also in response header H
//	X-Fake-Answer: N        an uncapped answer of N tokens
package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake. Its zero value answers 50 tokens to a prompt of
// 10. It is safe for concurrent use.
type Server struct {
	// Answer is how many tokens an uncapped answer has; 0 means 50.
	Answer int64
	// Prompt is the prompt tokens it reports; 0 means 10.
	Prompt int64
	// Gap is the pause between two events of a stream.
	Gap time.Duration

	mu       sync.Mutex // guards received
	received []Received
}

// Received is a request the server received.
type Received struct {
	Header http.Header
	Body   []byte
	// Max is the cap it honoured: the smaller of max_completion_tokens
	// and max_tokens when both are given; 0 when none.
	Max int64
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Last returns the last request received; ok is false before one.
func (s *Server) Last() (r Received, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.received) == 0 {
		return Received{}, false
	}
	return s.received[len(s.received)-1], true
}

type request struct {
	Model               string `json:"model"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	N                   *int64 `json:"n"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, "no such endpoint: POST /v1/chat/completions")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not JSON: "+err.Error())
		return
	}
	capped := int64(0)
	for _, p := range []*int64{req.MaxCompletionTokens, req.MaxTokens} {
		if p != nil && (capped == 0 || *p < capped) {
			capped = *p
		}
	}
	if capped < 0 || (req.N != nil && *req.N < 1) {
		writeError(w, http.StatusBadRequest, "max tokens and n must be positive")
		return
	}
	s.mu.Lock()
	s.received = append(s.received, Received{Header: r.Header.Clone(), Body: body, Max: capped})
	s.mu.Unlock()

	n := int64(1)
	if req.N != nil {
		n = *req.N
	}
	each := s.Answer
	if v, err := strconv.ParseInt(r.Header.Get("X-Fake-Answer"), 10, 64); err == nil && v > 0 {
		each = v
	}
	if each == 0 {
		each = 50
	}
	if capped > 0 {
		each = min(each, capped)
	}
	u := usage{PromptTokens: s.Prompt, CompletionTokens: each * n}
	if u.PromptTokens == 0 {
		u.PromptTokens = 10
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	mode := r.Header.Get("X-Fake-Mode")
	if h := r.Header.Get("X-Fake-Usage-Header"); h != "" {
		w.Header().Set(h, fmt.Sprint(u.TotalTokens))
	}
	switch {
	case mode == "error":
		writeError(w, http.StatusInternalServerError, "the model failed")
	case req.Stream:
		s.stream(w, req, n, each, u, mode)
	default:
		s.answer(w, req, n, each, u, mode)
	}
}

const id = "chatcmpl-fake"

func (s *Server) answer(w http.ResponseWriter, req request, n, each int64, u usage, mode string) {
	choices := make([]map[string]any, n)
	for i := range choices {
		choices[i] = map[string]any{
			"index":         i,
			"message":       map[string]any{"role": "assistant", "content": strings.Repeat("tok ", int(each))},
			"finish_reason": finish(each, req),
		}
	}
	out := map[string]any{"id": id, "object": "chat.completion", "created": 1700000000, "model": model(req), "choices": choices}
	if mode != "no-usage" {
		out["usage"] = u
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) stream(w http.ResponseWriter, req request, n, each int64, u usage, mode string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage && mode != "no-usage"
	event := func(choices []map[string]any, usage any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model(req), "choices": choices}
		if withUsage {
			chunk["usage"] = usage
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
		if s.Gap > 0 {
			time.Sleep(s.Gap)
		}
	}
	for t := range each {
		if mode == "cut" && t == each/2 {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		choices := make([]map[string]any, n)
		for i := range choices {
			choices[i] = map[string]any{"index": i, "delta": map[string]any{"content": "tok "}, "finish_reason": nil}
			if t == each-1 {
				choices[i]["finish_reason"] = finish(each, req)
			}
		}
		event(choices, nil)
	}
	if withUsage {
		event([]map[string]any{}, u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func finish(each int64, req request) string {
	for _, p := range []*int64{req.MaxCompletionTokens, req.MaxTokens} {
		if p != nil && *p == each {
			return "length"
		}
	}
	return "stop"
}

func model(req request) string {
	if req.Model == "" {
		return "fake"
	}
	return req.Model
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}
