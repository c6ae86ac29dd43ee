package proxy

import (
	"encoding/json"
	"mime"
	"net/http"
)

// openAIErrors is the answer of a request on a route whose tokens come
// from OpenAI's usage, while the gateway answers it itself (a denial, a
// refused body, an upstream that failed): a JSON error the gateway
// writes, {"error": "<text>"}, goes out in OpenAI's shape,
// {"error": {"message": "<text>", "type": …, "code": …}}, which OpenAI's
// SDKs read (they read an "error" that is a string as no error at all).
// Answers in plain text, and the upstream's own, pass as they are.
type openAIErrors struct {
	http.ResponseWriter
	status int // a JSON error's status, held until its body
}

func (w *openAIErrors) WriteHeader(code int) {
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); code >= 400 && mt == "application/json" {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *openAIErrors) Write(p []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(p)
	}
	status := w.status
	w.status = 0
	var e struct {
		Error string `json:"error"`
	}
	body := p
	if json.Unmarshal(p, &e) == nil && e.Error != "" {
		body = openAIErrorBody(status, e.Error)
	}
	w.ResponseWriter.WriteHeader(status)
	if _, err := w.ResponseWriter.Write(body); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *openAIErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// openAIErrorBody is msg as OpenAI answers an error of status: the type
// and code its SDKs and clients branch on.
func openAIErrorBody(status int, msg string) []byte {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
	return append(b, '\n')
}
