package tokens_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy/tokens"
)

// chunked reads data in pieces of the sizes given, cycling through them,
// then fails with err (io.EOF when nil).
type chunked struct {
	data  []byte
	sizes []int
	i     int
	err   error
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunked) Close() error { return nil }

// meter relays body through a metered answer of content type ct, read in
// pieces of sizes, and returns what the client gets and the result.
func meter(t testing.TB, ct, body string, src tokens.Source, strip bool, sizes ...int) (string, tokens.Result) {
	t.Helper()
	resp := &http.Response{Header: http.Header{"Content-Type": {ct}}, Body: &chunked{data: []byte(body), sizes: sizes}}
	b := tokens.Meter(resp, src, strip)
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the metered body: %v", err)
	}
	resp.Body.Close()
	return string(out), b.Result()
}

const sse = "text/event-stream"

var openai = tokens.Source{OpenAI: true}

// A stream as OpenAI sends it with stream_options.include_usage.
const (
	chunk1    = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n"
	chunk2    = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
	usageOnly = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n"
	done      = "data: [DONE]\n\n"
)

func TestStream(t *testing.T) {
	t.Parallel()
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	cr := func(s string) string { return strings.ReplaceAll(s, "\n", "\r") }
	for _, tc := range []struct {
		name   string
		in     string
		strip  bool
		want   string // "" : the input unchanged
		used   int64
		seen   bool
		cutErr error // the upstream fails after in
	}{
		{name: "usage stripped", in: chunk1 + chunk2 + usageOnly + done, strip: true, want: chunk1 + chunk2 + done, used: 11, seen: true},
		{name: "usage kept when asked", in: chunk1 + chunk2 + usageOnly + done, used: 11, seen: true},
		{name: "CRLF", in: crlf(chunk1 + usageOnly + done), strip: true, want: crlf(chunk1 + done), used: 11, seen: true},
		{name: "CR", in: cr(chunk1 + usageOnly + done), strip: true, want: cr(chunk1 + done), used: 11, seen: true},
		{name: "comments and other fields kept", in: ": keep-alive\n\nevent: x\nid: 7\nretry: 5\n" + chunk1 + ":c\n" + usageOnly + done, strip: true,
			want: ": keep-alive\n\nevent: x\nid: 7\nretry: 5\n" + chunk1 + done, used: 11, seen: true},
		{name: "multi-line data", in: chunk1 + "data: {\"choices\":[],\ndata: \"usage\":{\"total_tokens\":4}}\n\n" + done, strip: true, want: chunk1 + done, used: 4, seen: true},
		{name: "no space after data:", in: "data:{\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n" + done, strip: true, want: done, used: 3, seen: true},
		{name: "a comment inside the usage event", in: ": x\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n" + done, strip: true, want: done, used: 3, seen: true},
		{name: "vLLM: choices null", in: chunk1 + "data: {\"choices\":null,\"usage\":{\"total_tokens\":5}}\n\n" + done, strip: true, want: chunk1 + done, used: 5, seen: true},
		{name: "vLLM: choices absent", in: chunk1 + "data: {\"usage\":{\"total_tokens\":5}}\n\n" + done, strip: true, want: chunk1 + done, used: 5, seen: true},
		{name: "usage in the last content chunk: kept", in: "data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"total_tokens\":6}}\n\n" + done, strip: true, used: 6, seen: true},
		{name: "Azure's preamble kept", in: "data: {\"choices\":[],\"prompt_filter_results\":[{}]}\n\n" + chunk1 + usageOnly + done, strip: true,
			want: "data: {\"choices\":[],\"prompt_filter_results\":[{}]}\n\n" + chunk1 + done, used: 11, seen: true},
		{name: "the last usage counts", in: "data: {\"choices\":[{}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n" + "data: {\"choices\":[{}],\"usage\":{\"completion_tokens\":20}}\n\n", used: 29, seen: true},
		{name: "Responses API", in: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":7,\"total_tokens\":12}}}\n\n", strip: true, used: 12, seen: true},
		{name: "no usage", in: chunk1 + chunk2 + done, strip: true},
		{name: "absurd usage: none, still stripped", in: chunk1 + "data: {\"choices\":[],\"usage\":{\"total_tokens\":-3}}\n\n" + done, strip: true, want: chunk1 + done},
		{name: "a usage of 10^12: none", in: "data: {\"choices\":[{}],\"usage\":{\"total_tokens\":1000000000000}}\n\n"},
		{name: "data that is not JSON", in: "data: {\"usage\": 3\n\n" + done, strip: true},
		{name: "unterminated last event: read, never stripped", in: chunk1 + "data: {\"choices\":[],\"usage\":{\"total_tokens\":8}}", strip: true, used: 8, seen: true},
		{name: "cut", in: chunk1 + chunk2, strip: true, cutErr: errors.New("connection reset")},
		{name: "empty", in: "", strip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := tc.want
			if want == "" {
				want = tc.in
			}
			// Whole, and split at every size from 1 byte up.
			for size := 0; size <= len(tc.in)+1; size++ {
				resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Content-Length": {"1"}}, ContentLength: 1,
					Body: &chunked{data: []byte(tc.in), sizes: []int{max(size, len(tc.in)*(1-min(size, 1)))}, err: tc.cutErr}}
				b := tokens.Meter(resp, openai, tc.strip)
				if tc.strip && (resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "") {
					t.Fatalf("stripping, the Content-Length stays")
				}
				out, err := io.ReadAll(resp.Body)
				if !errors.Is(err, tc.cutErr) {
					t.Fatalf("size %d: read error %v, want %v", size, err, tc.cutErr)
				}
				resp.Body.Close()
				if string(out) != want {
					t.Fatalf("size %d: the client got\n%q\nwant\n%q", size, out, want)
				}
				res := b.Result()
				if res.Used != tc.used || res.Seen != tc.seen || res.Cut != (tc.cutErr != nil) {
					t.Fatalf("size %d: Result = %+v, want used %d seen %v cut %v", size, res, tc.used, tc.seen, tc.cutErr != nil)
				}
			}
		})
	}
}

// TestStreamEventAtATime checks that the relay hands out each event as
// soon as it is whole: it never reads the upstream again while it holds
// a whole event.
func TestStreamEventAtATime(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	resp := &http.Response{Header: http.Header{"Content-Type": {sse}}, Body: pr}
	b := tokens.Meter(resp, openai, true)
	buf := make([]byte, 64<<10)
	go func() {
		_, _ = pw.Write([]byte(chunk1 + "data: {\"cho"))
	}()
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != chunk1 {
		t.Fatalf("first Read = %q, %v; want the first event alone", buf[:n], err)
	}
	go func() {
		_, _ = pw.Write([]byte("ices\":[],\"usage\":{\"total_tokens\":2}}\n\n"))
		_, _ = pw.Write([]byte(done))
		pw.Close()
	}()
	n, err = resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != done {
		t.Fatalf("second Read = %q, %v; want [DONE] alone (the usage event stripped)", buf[:n], err)
	}
	if n, err = resp.Body.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("third Read = %d, %v; want EOF", n, err)
	}
	if res := b.Result(); res != (tokens.Result{Used: 2, Seen: true}) {
		t.Fatalf("Result = %+v", res)
	}
}

func TestStreamClosedEarlyIsCut(t *testing.T) {
	t.Parallel()
	resp := &http.Response{Header: http.Header{"Content-Type": {sse}}, Body: &chunked{data: []byte(chunk1 + chunk2 + usageOnly + done), sizes: []int{len(chunk1)}}}
	b := tokens.Meter(resp, openai, true)
	if _, err := resp.Body.Read(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if res := b.Result(); !res.Cut || res.Seen {
		t.Fatalf("Result = %+v, want cut and no usage", res)
	}
}

func TestStreamOversizeEvent(t *testing.T) {
	t.Parallel()
	big := "data: {\"choices\":[],\"usage\":{\"total_tokens\":1},\"pad\":\"" + strings.Repeat("x", tokens.MaxEvent) + "\"}\n\n"
	in := chunk1 + big + usageOnly + done
	for _, size := range []int{0, 1000, 4096, 32 << 10, 100000} {
		out, res := meter(t, sse, in, openai, true, max(size, len(in)*(1-min(size, 1))))
		if out != chunk1+big+done {
			t.Fatalf("size %d: the client got %d bytes, want %d: the oversize event relayed unread", size, len(out), len(chunk1+big+done))
		}
		if res != (tokens.Result{Used: 11, Seen: true}) {
			t.Fatalf("size %d: Result = %+v", size, res)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 3<<20)
	for _, tc := range []struct {
		name string
		in   string
		used int64
		seen bool
	}{
		{name: "total", in: `{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"completion_tokens_details":{"reasoning_tokens":1}}}`, used: 11, seen: true},
		{name: "prompt + completion", in: `{"usage":{"prompt_tokens":9,"completion_tokens":2}}`, used: 11, seen: true},
		{name: "input + output", in: `{"object":"response","usage":{"input_tokens":4,"output_tokens":6}}`, used: 10, seen: true},
		{name: "usage first", in: `{"usage":{"total_tokens":3},"choices":[]}`, used: 3, seen: true},
		{name: "spaces", in: "{ \"usage\" :\n {\"total_tokens\" : 3 } }", used: 3, seen: true},
		{name: "a long answer before it", in: `{"choices":[{"message":{"content":"` + long + `"}}],"usage":{"total_tokens":7}}`, used: 7, seen: true},
		{name: "usage inside a string is text", in: `{"content":"\"usage\":{\"total_tokens\":5}","usage":{"total_tokens":9}}`, used: 9, seen: true},
		{name: "escaped quote before the name", in: `{"a":"\\","usage":{"total_tokens":2}}`, used: 2, seen: true},
		{name: "nested usage is not the answer's", in: `{"choices":[{"usage":{"total_tokens":5}}]}`},
		{name: "null", in: `{"usage":null}`},
		{name: "negative", in: `{"usage":{"total_tokens":-1}}`},
		{name: "absurd", in: `{"usage":{"total_tokens":1000000001}}`},
		{name: "a fraction", in: `{"usage":{"total_tokens":1.5}}`},
		{name: "a string", in: `{"usage":{"total_tokens":"5"}}`},
		{name: "one bad count spoils it", in: `{"usage":{"total_tokens":5,"prompt_tokens":-1}}`},
		{name: "empty usage", in: `{"usage":{}}`},
		{name: "an array", in: `[{"usage":{"total_tokens":5}}]`},
		{name: "not JSON", in: `<html>502 Bad Gateway</html>`},
		{name: "escaped name", in: `{"us\u0061ge":{"total_tokens":5}}`},
		{name: "truncated", in: `{"usage":{"total_tokens":5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, size := range []int{0, 1, 2, 3, 7, 64} {
				out, res := meter(t, "application/json", tc.in, openai, true, max(size, len(tc.in)*(1-min(size, 1))))
				if out != tc.in {
					t.Fatalf("size %d: the body changed", size)
				}
				if res.Used != tc.used || res.Seen != tc.seen || res.Cut {
					t.Fatalf("size %d: Result = %+v, want used %d seen %v", size, res, tc.used, tc.seen)
				}
			}
		})
	}
}

func TestCompressedIsNotRead(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{sse, "application/json"} {
		in := chunk1 + usageOnly + done
		resp := &http.Response{Header: http.Header{"Content-Type": {ct}, "Content-Encoding": {"gzip"}}, Body: &chunked{data: []byte(in)}}
		b := tokens.Meter(resp, openai, true)
		out, _ := io.ReadAll(resp.Body)
		if string(out) != in {
			t.Errorf("%s: a compressed body changed", ct)
		}
		if res := b.Result(); res.Seen {
			t.Errorf("%s: usage read from a compressed body: %+v", ct, res)
		}
	}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	src, ok := tokens.ParseSource("header:x-usage-units")
	if !ok || src.Header != "X-Usage-Units" {
		t.Fatalf("ParseSource = %+v, %v", src, ok)
	}
	for _, tc := range []struct {
		name            string
		header, trailer []string
		used            int64
		seen            bool
	}{
		{name: "header", header: []string{"42"}, used: 42, seen: true},
		{name: "zero", header: []string{"0"}, used: 0, seen: true},
		{name: "trailer over header", header: []string{"1"}, trailer: []string{"50"}, used: 50, seen: true},
		{name: "a bad trailer: the header", header: []string{"1"}, trailer: []string{"x"}, used: 1, seen: true},
		{name: "spaces", header: []string{" 7 "}, used: 7, seen: true},
		{name: "none"},
		{name: "negative", header: []string{"-1"}},
		{name: "fraction", header: []string{"1.5"}},
		{name: "absurd", header: []string{"10000000000"}},
		{name: "two values", header: []string{"1", "2"}},
		{name: "plus sign", header: []string{"+3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{Header: http.Header{"Content-Type": {sse}}, Trailer: http.Header{}, Body: &chunked{data: []byte(usageOnly)}}
			if tc.header != nil {
				resp.Header["X-Usage-Units"] = tc.header
			}
			b := tokens.Meter(resp, src, true)
			out, _ := io.ReadAll(resp.Body)
			if tc.trailer != nil {
				resp.Trailer["X-Usage-Units"] = tc.trailer // net/http fills trailers at EOF
			}
			if string(out) != usageOnly {
				t.Fatalf("a header source changed the body: %q", out)
			}
			if res := b.Result(); res.Used != tc.used || res.Seen != tc.seen {
				t.Fatalf("Result = %+v, want used %d seen %v", res, tc.used, tc.seen)
			}
		})
	}
	for _, s := range []string{"", "openai ", "header:", "anthropic"} {
		if _, ok := tokens.ParseSource(s); ok {
			t.Errorf("ParseSource(%q) is ok", s)
		}
	}
}

func TestUsageTotal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reports []string
		want    int64
		seen    bool
	}{
		{reports: []string{`{"total_tokens":10,"prompt_tokens":1,"completion_tokens":1}`}, want: 10, seen: true},
		{reports: []string{`{"prompt_tokens":3}`}, want: 3, seen: true},
		{reports: []string{`{"completion_tokens":3,"input_tokens":100}`}, want: 3, seen: true},
		{reports: []string{`{"output_tokens":4}`}, want: 4, seen: true},
		// Anthropic-like: the input at the start, cumulative outputs.
		{reports: []string{`{"input_tokens":10,"output_tokens":1}`, `{"output_tokens":5}`, `{"output_tokens":9}`}, want: 19, seen: true},
		{reports: []string{`{"prompt_tokens":10}`, `{"completion_tokens":5,"total_tokens":null}`}, want: 15, seen: true},
		{reports: []string{`{"total_tokens":7}`, `{"total_tokens":-7}`}, want: 7, seen: true},
		{reports: []string{`{}`, `null`, `[]`, `{"other":1}`}},
	} {
		var u tokens.Usage
		for _, r := range tc.reports {
			u.Add([]byte(r))
		}
		if got, seen := u.Total(); got != tc.want || seen != tc.seen {
			t.Errorf("%v: Total = %d, %v; want %d, %v", tc.reports, got, seen, tc.want, tc.seen)
		}
	}
}

// FuzzJSON checks that no body panics the scan, that the body goes
// through unchanged however it is cut into reads, and that a valid JSON
// object's usage is what encoding/json reads.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"total_tokens":11}}`, `{"a":"\"usage\":{}","usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"usage":{"prompt_tokens":5},"usage":{"completion_tokens":3}}`, `[{"usage":{"total_tokens":1}}]`, `{"usage":null}`,
	} {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint16) {
		out, res := meter(t, "application/json", string(in), openai, true, int(size%512)+1)
		if out != string(in) {
			t.Fatalf("the body changed")
		}
		if _, whole := meter(t, "application/json", string(in), openai, true); res != whole {
			t.Fatalf("in pieces of %d: %+v; whole: %+v", size%512+1, res, whole)
		}
		var obj map[string]json.RawMessage
		if !json.Valid(in) || json.Unmarshal(in, &obj) != nil || !bytes.Contains(in, []byte(`"usage"`)) {
			return
		}
		var u tokens.Usage
		want := tokens.Result{}
		if raw, ok := obj["usage"]; ok && u.Add(raw) {
			want.Used, want.Seen = u.Total()
		}
		if res != want {
			t.Fatalf("Result = %+v, encoding/json reads %+v", res, want)
		}
	})
}

// FuzzStream checks that no stream panics the relay, that how it is cut
// into reads changes nothing, and that the client gets the stream minus
// exactly the usage-only events (framed here on the whole input).
func FuzzStream(f *testing.F) {
	for _, s := range []string{
		chunk1 + chunk2 + usageOnly + done,
		strings.ReplaceAll(chunk1+usageOnly+done, "\n", "\r\n"),
		strings.ReplaceAll(chunk1+usageOnly+done, "\n", "\r"),
		": c\r\ndata:{\"usage\":{\"total_tokens\":1}}\r\r\n\ndata: x\n",
		"data: {\"choices\":null,\n data: \"usage\":{}}\n\n",
	} {
		f.Add([]byte(s), uint16(7), uint16(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		sizes := []int{int(a%512) + 1, int(b%64) + 1}
		out, res := meter(t, sse, string(in), openai, true, sizes...)
		whole, wres := meter(t, sse, string(in), openai, true)
		if out != whole || res != wres {
			t.Fatalf("read in pieces %v: %q, %+v; whole: %q, %+v", sizes, out, res, whole, wres)
		}
		if want := withoutUsageOnly(in); out != want {
			t.Fatalf("relayed\n%q\nwant\n%q", out, want)
		}
		if kept, _ := meter(t, sse, string(in), openai, false, sizes...); kept != string(in) {
			t.Fatalf("without strip the stream changed: %q", kept)
		}
	})
}

// withoutUsageOnly is the reference: in, framed whole, without its
// terminated events that hold a usage object and no choices.
func withoutUsageOnly(in []byte) string {
	var out, ev []byte
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			ev = append(ev, in...)
			break
		}
		end := i + 1
		if in[i] == '\r' && end < len(in) && in[end] == '\n' {
			end++
		}
		ev = append(ev, in[:end]...)
		in = in[end:]
		if i == 0 { // an empty line
			if !refUsageOnly(ev) {
				out = append(out, ev...)
			}
			ev = nil
		}
	}
	return string(append(out, ev...))
}

func refUsageOnly(ev []byte) bool {
	var data [][]byte
	for _, line := range bytes.FieldsFunc(bytes.TrimPrefix(ev, []byte("\xef\xbb\xbf")), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		} else if string(line) == "data" {
			data = append(data, nil)
		}
	}
	joined := bytes.Join(data, []byte("\n"))
	var obj map[string]json.RawMessage
	if !bytes.Contains(joined, []byte(`"usage"`)) || json.Unmarshal(joined, &obj) != nil {
		return false // names spelt with escapes are not read
	}
	u := bytes.TrimSpace(obj["usage"])
	if len(u) == 0 || u[0] != '{' {
		return false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(u, &probe) != nil {
		return false
	}
	c := bytes.TrimSpace(obj["choices"])
	if len(c) == 0 || string(c) == "null" {
		return true
	}
	var choices []json.RawMessage
	return json.Unmarshal(c, &choices) == nil && choices != nil && len(choices) == 0
}
