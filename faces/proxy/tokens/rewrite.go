package tokens

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Rewrite returns body, the request body q was parsed from, as the
// upstream gets it, with each answer capped at each tokens:
//
//   - every cap the body names (max_completion_tokens, max_tokens,
//     max_output_tokens) above each is lowered to it, never raised;
//   - a body that names none gets its API's cap ([API]), set to each;
//     a body of another API gets none;
//   - a stream (chat or legacy completions) whose client did not ask for
//     usage gets stream_options.include_usage: true, its other options
//     kept.
//
// each ≤ 0 caps nothing: only a stream's usage is asked for (a request
// admitted without a reservation that caps it). Every other member and
// value is kept byte for byte, in its order; a
// member named twice is sent once, with the value tokens read (the
// last), so that no upstream reads another. A body that needs none of
// this is returned as it is; a body that is not JSON (q.JSON false) too.
func Rewrite(body []byte, q Request, each int64) []byte {
	if !q.JSON {
		return body
	}
	obj, ok := decodeObject(body)
	if !ok {
		return body
	}
	changed := obj.dups
	capped := false
	limit := json.RawMessage(strconv.AppendInt(nil, max(each, 1), 10))
	for _, f := range capFields {
		raw := obj.get(f)
		if isNull(raw) || each <= 0 {
			continue
		}
		capped = true
		if v, _ := positive(raw); v > each {
			obj.set(f, limit)
			changed = true
		}
	}
	if f := q.API.capField(); !capped && f != "" && each > 0 {
		obj.set(f, limit)
		changed = true
	}
	if q.UsageAdded() {
		var opts object
		if raw := obj.get("stream_options"); !isNull(raw) {
			opts, _ = decodeObject(raw)
		}
		opts.set("include_usage", json.RawMessage("true"))
		obj.set("stream_options", opts.encode(nil))
		changed = true
	}
	if !changed {
		return body
	}
	return obj.encode(make([]byte, 0, len(body)+64))
}

// encode appends o to dst as a JSON object.
func (o *object) encode(dst []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // names as they came: no \u003c for <
	dst = append(dst, '{')
	for i, name := range o.names {
		if i > 0 {
			dst = append(dst, ',')
		}
		buf.Reset()
		_ = enc.Encode(name) // a string always encodes
		dst = append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		dst = append(dst, ':')
		dst = append(dst, o.values[i]...)
	}
	return append(dst, '}')
}
