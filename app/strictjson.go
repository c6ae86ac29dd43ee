package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// strictJSONError is a JSON document that encoding/json would accept but
// a strict reading rejects: a member name repeated in one object, or one
// that is not exactly a field name of the type it decodes into.
type strictJSONError struct {
	Offset int64  // just past the opening quote of the offending member name
	Path   string // of the member, such as tenants[1].id
	Msg    string
}

func (e *strictJSONError) Error() string { return e.Path + ": " + e.Msg }

// checkStrictJSON walks data's tokens alongside t, the Go type data is
// decoded into, and rejects what encoding/json lets through silently:
//
//   - a member name that appears twice in one object, at any depth
//     (encoding/json keeps the last, so {"id":"a","id":"b"} is "b");
//   - a member of a struct-typed object that is not exactly one of the
//     struct's json field names: encoding/json matches names
//     case-insensitively, so "ID" would fill "id", and
//     DisallowUnknownFields does not object.
//
// Objects decoded into maps or interfaces are checked for repeats only.
// Values of the wrong kind are left for the decoder to report. The error
// is a *strictJSONError with the member's offset and path; a syntax error
// is the decoder's *json.SyntaxError, so checkStrictJSON may run before
// or after decoding. Member values never appear in the error (they may be
// secrets such as API keys); member names do.
//
// It is the shared strict reading of every file the gateway loads (the
// tenants file; the policy file will use it too).
func checkStrictJSON(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not decoded, only skipped
	w := &jsonWalker{dec: dec, data: data}
	return w.value(t, "")
}

// jsonWalker is one walk of checkStrictJSON.
type jsonWalker struct {
	dec  *json.Decoder
	data []byte
}

// nameOffset returns the offset just past the opening quote of the member
// name that follows from, the decoder's offset before reading the name.
func (w *jsonWalker) nameOffset(from int64) int64 {
	for from < int64(len(w.data)) && strings.IndexByte(" \t\r\n,", w.data[from]) >= 0 {
		from++
	}
	return from + 1
}

// value checks the next value, to be decoded into t (nil: anything),
// found at path.
func (w *jsonWalker) value(t reflect.Type, path string) error {
	dec := w.dec
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := w.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil // a scalar
}

// object checks the members of an object whose '{' was just read.
func (w *jsonWalker) object(t reflect.Type, path string) error {
	dec := w.dec
	var fields map[string]reflect.Type
	var elem reflect.Type // of a map's values
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := make(map[string]bool)
	for dec.More() {
		at := w.nameOffset(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		member := name
		if path != "" {
			member = path + "." + name
		}
		if seen[name] {
			return &strictJSONError{Offset: at, Path: member,
				Msg: fmt.Sprintf("repeated member %q: each name may appear once per object", name)}
		}
		seen[name] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[name]
			if !ok {
				msg := fmt.Sprintf("unknown field %q", name)
				if want := foldMatch(fields, name); want != "" {
					msg += fmt.Sprintf(" (field names are case-sensitive: want %q)", want)
				}
				return &strictJSONError{Offset: at, Path: member, Msg: msg}
			}
			vt = ft
		}
		if err := w.value(vt, member); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// jsonFields returns the json member names of struct t and their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// foldMatch returns the field name that equals name but for case, or "".
func foldMatch(fields map[string]reflect.Type, name string) string {
	for f := range fields {
		if strings.EqualFold(f, name) {
			return f
		}
	}
	return ""
}

// strictOffset returns the offset of err, a strictJSONError or a
// *json.SyntaxError, or -1.
func strictOffset(err error) int64 {
	var se *strictJSONError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return se.Offset
	case errors.As(err, &syn):
		return syn.Offset
	}
	return -1
}
