package tokens

import (
	"io"
	"mime"
	"net/http"
	"strings"
)

// Source is where a route's token counts come from.
type Source struct {
	// OpenAI reads the usage OpenAI's APIs report in their answers.
	OpenAI bool
	// Header, when not empty, is the response header (or trailer) that
	// holds the count.
	Header string
}

// ParseSource reads a route's "tokens": "openai" or "header:<Name>".
// ok is false for anything else, "" included.
func ParseSource(s string) (src Source, ok bool) {
	if s == "openai" {
		return Source{OpenAI: true}, true
	}
	if name, found := strings.CutPrefix(s, "header:"); found && name != "" {
		return Source{Header: http.CanonicalHeaderKey(name)}, true
	}
	return Source{}, false
}

// Result is what an answer reported, once its body is over.
type Result struct {
	// Used is the units it reported, when Seen.
	Used int64
	// Seen is true when it reported a count: a usage object (a JSON
	// answer's, or the last a stream's events held), or the header.
	Seen bool
	// Cut is true when its body did not reach its end: the upstream
	// failed in the middle, or the body was closed before its end (the
	// client gone).
	Cut bool
}

// Body is an answer's body as its client receives it, metered as it is
// read: with [Source.OpenAI], a text/event-stream is relayed event by
// event (each Read returns whole events) and any other body as it comes,
// its usage read (a compressed body goes untouched, unread); with
// [Source.Header], the body is untouched and the
// header or trailer read at its end. Read and Close are called from one
// goroutine at a time; [Body.Result] once they are done.
type Body struct {
	src    io.ReadCloser
	r      io.Reader // what Read reads: src, or a relay over it
	scan   *jsonScan // for a JSON answer; nil otherwise
	usage  Usage
	header string         // the count's header, with a header source
	resp   *http.Response // its trailers are read at the end
	eof    bool
	failed bool
}

// Meter replaces resp.Body with a [*Body] that meters it from src, and
// returns that Body. With strip, a stream's usage-only events are
// removed (the client did not ask for them); resp's Content-Length then
// goes, as the body may come out shorter.
func Meter(resp *http.Response, src Source, strip bool) *Body {
	b := &Body{src: resp.Body, r: resp.Body, resp: resp}
	switch {
	case src.Header != "":
		b.header = src.Header
	case encoded(resp.Header):
		// Compressed: relayed untouched, its usage unread.
	case isEventStream(resp.Header.Get("Content-Type")):
		b.r = newSSERelay(resp.Body, &b.usage, strip)
		if strip {
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
	default:
		b.scan = &jsonScan{}
	}
	resp.Body = b
	return b
}

// encoded reports whether h says the body is compressed (a
// Content-Encoding other than identity).
func encoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		if v = strings.TrimSpace(v); v != "" && !strings.EqualFold(v, "identity") {
			return true
		}
	}
	return false
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.scan != nil && n > 0 {
		b.scan.write(p[:n])
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.failed = true
	}
	return n, err
}

// Close closes the upstream's body.
func (b *Body) Close() error { return b.src.Close() }

// Result returns what the answer reported, and whether its body was cut.
func (b *Body) Result() Result {
	res := Result{Cut: b.failed || !b.eof}
	if b.header != "" {
		if v, ok := headerCount(b.resp.Trailer, b.header); ok && b.eof {
			res.Used, res.Seen = v, true
		} else if v, ok := headerCount(b.resp.Header, b.header); ok {
			res.Used, res.Seen = v, true
		}
		return res
	}
	if b.scan != nil && b.scan.last != nil {
		var u Usage
		u.Add(b.scan.last)
		res.Used, res.Seen = u.Total()
		return res
	}
	res.Used, res.Seen = b.usage.Total()
	return res
}

// headerCount reads h's one value of name as a count; two values, or
// one that is not a count, are none.
func headerCount(h http.Header, name string) (int64, bool) {
	vs := h[name]
	if len(vs) != 1 {
		return 0, false
	}
	return ParseCount(vs[0])
}
