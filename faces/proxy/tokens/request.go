// Package tokens reads what an LLM API's request asks for and what its
// answer reports, in OpenAI's shapes: the caps of a request body (and
// the body with its caps lowered), the usage of a JSON answer or of a
// text/event-stream, and a count in a response header or trailer. It
// knows no engine and no store: the proxy asks it for numbers and
// decides with them.
package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxBody is the most of a request body [Read] reads: 1 MiB.
const MaxBody = 1 << 20

// Huge is the most any count here takes: larger numbers (a max_tokens
// of 10^30) count as Huge, so that sums and products never overflow.
const Huge = 1 << 50

// API is the OpenAI API a request is for, which decides the cap it
// takes when it names none.
type API uint8

const (
	// Other is an API whose cap tokens does not know (embeddings,
	// moderations, an API of its own): its caps are lowered when it
	// names some, and none is added.
	Other API = iota
	// ChatCompletions is /chat/completions: max_completion_tokens is
	// added, as max_tokens is deprecated there and refused by OpenAI's
	// reasoning models.
	ChatCompletions
	// Completions is the legacy /completions: max_tokens, its only cap.
	Completions
	// Responses is /responses: max_output_tokens, its only cap.
	Responses
)

// APIOf returns the API a request path names, by its last segments
// (/v1/chat/completions, /openai/deployments/x/chat/completions).
func APIOf(path string) API {
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return ChatCompletions
	case strings.HasSuffix(path, "/completions"):
		return Completions
	case strings.HasSuffix(path, "/responses"):
		return Responses
	}
	return Other
}

// capField is the cap a request without one gets, by API; "" adds none.
func (a API) capField() string {
	switch a {
	case ChatCompletions:
		return "max_completion_tokens"
	case Completions:
		return "max_tokens"
	case Responses:
		return "max_output_tokens"
	}
	return ""
}

// usageOption reports whether the API takes stream_options.include_usage
// (the Responses API reports usage in its last event unasked).
func (a API) usageOption() bool { return a == ChatCompletions || a == Completions }

// capFields are the fields that cap an answer, in every API: a request
// that names several is capped by the largest, and each is lowered.
var capFields = [...]string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// Request is what a request body says about the tokens it may spend.
// The zero value is a body tokens cannot read: it is forwarded
// unchanged and reserves the route's default.
type Request struct {
	// JSON is true when the body is a JSON object: the caps below were
	// read, and [Rewrite] applies.
	JSON bool
	// API is the API the request is for.
	API API
	// Max is the largest cap the body names, each answer's (0: none).
	Max int64
	// Choices is how many answers the upstream generates, each up to
	// the cap: the largest of n and best_of, at least 1.
	Choices int64
	// Stream is the body's "stream": true.
	Stream bool
	// IncludeUsage is the body's stream_options.include_usage: true, the
	// client asking for the usage event of a stream.
	IncludeUsage bool
	// Prompt is the estimate of the prompt's tokens: the body's length
	// in bytes ÷ 4, rounded up (the whole body, not only its messages:
	// tools and schemas are prompt too).
	Prompt int64
}

// Units returns the reservation the request asks for: its prompt
// estimate plus its answers' caps, or plus answer (the route's default
// allowance) when it names no cap. 0 for a body that is not JSON: the
// route's default, whole.
func (q Request) Units(answer int64) int64 {
	if !q.JSON {
		return 0
	}
	if q.Max > 0 {
		answer = mulSat(q.Max, q.Choices)
	}
	return addSat(q.Prompt, max(answer, q.Choices))
}

// Least returns the least reservation that serves the request: its
// prompt estimate and one token for each answer. 0 for a body that is
// not JSON.
func (q Request) Least() int64 {
	if !q.JSON {
		return 0
	}
	return addSat(q.Prompt, q.Choices)
}

// UsageAdded reports whether [Rewrite] asks the upstream for a stream's
// usage that the client did not ask for: its answer's usage-only event
// is then the gateway's, and removed from what the client receives.
func (q Request) UsageAdded() bool {
	return q.JSON && q.Stream && !q.IncludeUsage && q.API.usageOption()
}

// Allowance returns the cap of each answer that a reservation of
// reserved covers: what is left of it past the prompt estimate, shared
// among the answers; at least 1.
func (q Request) Allowance(reserved int64) int64 {
	each := (reserved - q.Prompt) / max(q.Choices, 1)
	return max(each, 1)
}

// BadRequest is a body tokens refuses: a field it reads holds a value of
// the wrong type or range. The proxy answers 400 with its text: an
// upstream might read that value otherwise than tollgate does (a
// max_tokens of -1 is "no limit" to llama.cpp, a "4096" string or a
// 4096.0 is 4096 to a lenient parser), and the cap would not hold.
type BadRequest struct {
	Field string // the field, as the body names it
	Want  string // what it must be
}

func (e *BadRequest) Error() string {
	return fmt.Sprintf("%s must be %s", e.Field, e.Want)
}

// ErrTooLarge is [Read]'s error for a body of more than [MaxBody] bytes:
// the proxy answers 413 rather than forward caps it could not lower.
var ErrTooLarge = errors.New("request body larger than 1 MiB")

// Read reads body, at most [MaxBody] bytes of it: the bytes read, or
// [ErrTooLarge] past MaxBody, or the reader's error.
func Read(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBody {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Parse reads what body, the request body of api, asks for. A body that
// is not one JSON object (empty, truncated, an array, text, gzip) is the
// zero Request with JSON false and no error: it is forwarded unchanged.
// A JSON object whose caps, n, best_of, stream or stream_options hold a
// value of the wrong type is a [*BadRequest]:
//
//   - a cap, n and best_of: null, or an integer written as digits, at
//     least 1 (0, -1, 1.5, 1e3, "100", true: refused); one past [Huge]
//     counts as Huge;
//   - stream and stream_options.include_usage: null or a boolean;
//   - stream_options: null or an object.
//
// null is the field's absence, as OpenAI reads it.
func Parse(api API, body []byte) (Request, error) {
	obj, ok := decodeObject(body)
	if !ok {
		return Request{}, nil
	}
	q := Request{JSON: true, API: api, Choices: 1, Prompt: (int64(len(body)) + 3) / 4}
	if api == Other && obj.has("messages") {
		q.API = ChatCompletions
	}
	for _, f := range capFields {
		v, err := count(obj, f)
		if err != nil {
			return Request{}, err
		}
		q.Max = max(q.Max, v)
	}
	for _, f := range [...]string{"n", "best_of"} {
		v, err := count(obj, f)
		if err != nil {
			return Request{}, err
		}
		q.Choices = max(q.Choices, v)
	}
	var err error
	if q.Stream, err = boolean(obj.get("stream"), "stream"); err != nil {
		return Request{}, err
	}
	if raw := obj.get("stream_options"); !isNull(raw) {
		opts, ok := decodeObject(raw)
		if !ok {
			return Request{}, &BadRequest{Field: "stream_options", Want: "an object"}
		}
		if q.IncludeUsage, err = boolean(opts.get("include_usage"), "stream_options.include_usage"); err != nil {
			return Request{}, err
		}
	}
	return q, nil
}

// count reads field f of obj as a count: 0 when absent or null.
func count(obj object, f string) (int64, error) {
	raw := obj.get(f)
	if isNull(raw) {
		return 0, nil
	}
	v, ok := positive(raw)
	if !ok {
		return 0, &BadRequest{Field: f, Want: "a positive integer"}
	}
	return v, nil
}

// positive reads raw as an integer of digits alone, at least 1, at most
// Huge (larger ones are Huge).
func positive(raw []byte) (int64, bool) {
	if len(raw) == 0 || raw[0] == '0' {
		return 0, false // empty, 0, or a leading zero JSON refuses
	}
	var v int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v < Huge {
			v = v*10 + int64(c-'0')
		}
	}
	return min(v, Huge), true
}

// boolean reads raw as a boolean: false when absent or null.
func boolean(raw []byte, field string) (bool, error) {
	switch {
	case isNull(raw):
		return false, nil
	case bytes.Equal(raw, []byte("true")):
		return true, nil
	case bytes.Equal(raw, []byte("false")):
		return false, nil
	}
	return false, &BadRequest{Field: field, Want: "a boolean"}
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw []byte) bool { return raw == nil || bytes.Equal(raw, []byte("null")) }

// object is a JSON object's members in their order, each value as its
// compact bytes; a name given twice keeps its last value, in its first
// place (as encoding/json and Python's json read it).
type object struct {
	names  []string
	values []json.RawMessage
	at     map[string]int // a name's index in names
	dups   bool           // a name was given more than once
}

func (o *object) has(name string) bool { return o.index(name) >= 0 }

func (o *object) index(name string) int {
	if i, ok := o.at[name]; ok {
		return i
	}
	return -1
}

// get returns name's value, nil when absent.
func (o *object) get(name string) json.RawMessage {
	if i := o.index(name); i >= 0 {
		return o.values[i]
	}
	return nil
}

// set sets name's value, appending it when absent.
func (o *object) set(name string, v json.RawMessage) {
	if i := o.index(name); i >= 0 {
		o.values[i] = v
		o.dups = true
		return
	}
	if o.at == nil {
		o.at = make(map[string]int)
	}
	o.at[name] = len(o.names)
	o.names = append(o.names, name)
	o.values = append(o.values, v)
}

// decodeObject reads b as one JSON object (a UTF-8 byte order mark
// before it is allowed, as Python's json reads bytes). ok is false for
// anything else.
func decodeObject(b []byte) (object, bool) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return object{}, false
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return object{}, false
		}
		name, ok := t.(string)
		if !ok {
			return object{}, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return object{}, false
		}
		o.set(name, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return object{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return object{}, false // something after the object
	}
	return o, true
}

// addSat is a+b, at most Huge.
func addSat(a, b int64) int64 { return min(a+b, Huge) } // both ≤ Huge: no overflow

// mulSat is a×b, at most Huge.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > Huge/b {
		return Huge
	}
	return min(a*b, Huge)
}
