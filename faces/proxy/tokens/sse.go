package tokens

import (
	"bytes"
	"encoding/json"
	"io"
)

// MaxEvent bounds the event a stream's relay holds to read it whole: a
// larger one is relayed in pieces as it comes, unread (its usage is not
// seen, and it is never removed).
const MaxEvent = 1 << 20

// sseBufSize is the stream relay's first buffer size; it grows up to
// MaxEvent for a large event.
const sseBufSize = 32 << 10

// sseRelay relays a text/event-stream event by event: each Read returns
// only whole events (every one that has arrived and fits), so a flush
// after each Read delivers each event as soon as it is complete, and
// never holds more than the event being received. It reads the usage of
// every event that reports one, and with strip it removes the events
// that hold nothing but a usage (usageOnly).
//
// Framing follows the HTML standard's event stream: lines end with CRLF,
// LF or CR; an empty line ends an event; "data:" lines (one space after
// the colon dropped) are joined with LF; lines beginning with ':' are
// comments.
type sseRelay struct {
	src   io.Reader
	usage *Usage
	strip bool

	buf   []byte
	out   int // buf[out:ready] is relayed next
	ready int // buf[ready:] is the event being received
	scan  int // where the search for the event's end goes on; ≥ ready
	// atLineStart is true when buf[scan-1] ended a line (or nothing came
	// yet): a line ending at scan is empty, and ends the event.
	atLineStart bool
	// oversize is true while an event past MaxEvent is relayed in pieces:
	// the bytes up to its end are relayed unread.
	oversize bool
	err      error // src's error, io.EOF at its end; returned once buf is relayed
}

func newSSERelay(src io.Reader, usage *Usage, strip bool) *sseRelay {
	return &sseRelay{src: src, usage: usage, strip: strip, atLineStart: true}
}

func (s *sseRelay) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for s.out == s.ready {
		if s.err != nil {
			if s.ready < len(s.buf) {
				// The stream ended in the middle of an event: it is
				// relayed as it came, its usage read, never removed.
				if !s.oversize {
					s.event(s.buf[s.ready:], false)
				}
				s.ready = len(s.buf)
				continue
			}
			return 0, s.err
		}
		s.fill()
	}
	n := copy(p, s.buf[s.out:s.ready])
	s.out += n
	return n, nil
}

// fill reads src once and frames what came. It is called when all that
// was ready has been relayed (out == ready).
func (s *sseRelay) fill() {
	if s.out > 0 {
		// Move the event being received to the front.
		k := copy(s.buf, s.buf[s.ready:])
		s.buf = s.buf[:k]
		s.scan -= s.ready
		s.out, s.ready = 0, 0
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, sseBufSize)
	}
	if len(s.buf) == cap(s.buf) {
		if len(s.buf) >= MaxEvent {
			// The event outgrew MaxEvent: what came of it is relayed,
			// and the rest as it comes, up to its end (scan is at most
			// one byte short: a CR waiting for its LF).
			s.oversize = true
			s.ready = s.scan
			return
		}
		grown := make([]byte, len(s.buf), min(2*cap(s.buf), MaxEvent+sseBufSize))
		copy(grown, s.buf)
		s.buf = grown
	}
	n, err := s.src.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	if err != nil {
		s.err = err
	}
	s.frame()
}

// frame finds the ends of the events in buf[scan:], reads each, and
// removes those to strip.
func (s *sseRelay) frame() {
	for {
		i := lineEnd(s.buf[s.scan:])
		if i < 0 {
			if s.scan < len(s.buf) {
				s.atLineStart = false
			}
			s.scan = len(s.buf)
			break
		}
		eol := s.scan + i
		if i > 0 {
			s.atLineStart = false
		}
		next := eol + 1
		if s.buf[eol] == '\r' {
			if next == len(s.buf) && s.err == nil {
				s.scan = eol // a CR last: the next byte may be its LF
				break
			}
			if next < len(s.buf) && s.buf[next] == '\n' {
				next++
			}
		}
		empty := s.atLineStart
		s.scan, s.atLineStart = next, true
		switch {
		case !empty:
		case s.oversize:
			s.oversize = false
			s.ready = next
		case s.event(s.buf[s.ready:next], s.strip):
			// Removed: the bytes after it move down over it.
			k := copy(s.buf[s.ready:], s.buf[next:])
			s.buf = s.buf[:s.ready+k]
			s.scan = s.ready
		default:
			s.ready = next
		}
	}
	if s.oversize {
		s.ready = s.scan
	}
}

// usageKey is how an event that may report usage names it.
var usageKey = []byte(`"usage"`)

// event reads ev, one event, for a usage, and reports whether to remove
// it: with strip, an event that holds nothing but a usage. Names are
// read as sent: a name spelt with escapes ("us\u0061ge") is not read.
func (s *sseRelay) event(ev []byte, strip bool) bool {
	if !mayReportUsage(ev) {
		return false
	}
	data := eventData(ev)
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return false
	}
	usage := obj["usage"]
	if !isNull(usage) {
		s.usage.Add(usage)
	} else if resp := obj["response"]; !isNull(resp) {
		// The Responses API: the usage is in the final event's response.
		var r map[string]json.RawMessage
		if json.Unmarshal(resp, &r) == nil && !isNull(r["usage"]) {
			s.usage.Add(r["usage"])
		}
		return false
	}
	return strip && usageOnly(obj)
}

// usageOnly reports whether a stream's chunk holds nothing but a usage:
// a usage object, and choices empty, null or absent (OpenAI sends [];
// vLLM sends null or nothing). A chunk with choices, or without a usage
// (Azure's content-filter preamble), is not.
func usageOnly(obj map[string]json.RawMessage) bool {
	u := bytes.TrimSpace(obj["usage"])
	if len(u) == 0 || u[0] != '{' {
		return false
	}
	c := bytes.TrimSpace(obj["choices"])
	if isNull(c) {
		return true
	}
	var choices []json.RawMessage
	return json.Unmarshal(c, &choices) == nil && choices != nil && len(choices) == 0
}

// mayReportUsage reports whether ev may name "usage" with a value other
// than null: a quick test on the event's bytes before decoding its
// data, as with stream usage requested every chunk says "usage":null.
func mayReportUsage(ev []byte) bool {
	for {
		i := bytes.Index(ev, usageKey)
		if i < 0 {
			return false
		}
		ev = bytes.TrimLeft(ev[i+len(usageKey):], " \t")
		if len(ev) == 0 || ev[0] != ':' {
			return true // a line break, or else: decode to know
		}
		ev = bytes.TrimLeft(ev[1:], " \t")
		if !bytes.HasPrefix(ev, []byte("null")) {
			return true
		}
	}
}

// eventData returns the data of ev, one event: its data lines' values
// joined with LF (the one line's value is a part of ev, not a copy).
func eventData(ev []byte) []byte {
	ev = bytes.TrimPrefix(ev, []byte("\xef\xbb\xbf"))
	var data []byte
	lines := 0
	for len(ev) > 0 {
		line := ev
		ev = nil
		if i := lineEnd(line); i >= 0 {
			ev = line[i+1:]
			if line[i] == '\r' && len(ev) > 0 && ev[0] == '\n' {
				ev = ev[1:]
			}
			line = line[:i]
		}
		value, ok := bytes.CutPrefix(line, []byte("data"))
		if !ok {
			continue
		}
		switch {
		case len(value) == 0:
		case value[0] == ':':
			value = bytes.TrimPrefix(value[1:], []byte(" "))
		default:
			continue // another field, whose name begins with data
		}
		switch lines++; lines {
		case 1:
			data = value
		case 2:
			data = append(append(append([]byte(nil), data...), '\n'), value...)
		default:
			data = append(append(data, '\n'), value...)
		}
	}
	return data
}

// lineEnd returns the index of the first CR or LF in b, -1 if none.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	line := b
	if lf >= 0 {
		line = b[:lf]
	}
	if cr := bytes.IndexByte(line, '\r'); cr >= 0 {
		return cr
	}
	return lf
}
