// Package strictjson decodes the JSON files an operator writes (the
// tenants file, the policy file) strictly: encoding/json's
// DisallowUnknownFields is not enough, as repeated members and field
// names in another case slip through it. Errors name the variable, the
// file, the line:column and the field path, and never hold a value (a
// file may carry secrets such as API keys).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
)

// FileError is a file named by a variable (the tenants file, the policy
// file) that cannot be read, does not parse or breaks a rule. Its
// message is one line that names the variable, the file and the problem,
// and never holds a secret such as an API key.
type FileError struct {
	// Var is the variable that names the file: TOLLGATE_TENANTS_FILE.
	Var  string
	Path string
	// Line and Column locate a syntax or type error, 1-based, in bytes; 0
	// when the problem has no single position.
	Line, Column int
	Err          error
}

// Error returns the one-line message: variable, file, position, problem.
func (e *FileError) Error() string {
	pos := ""
	if e.Line > 0 {
		pos = fmt.Sprintf("%d:%d: ", e.Line, e.Column)
	}
	return fmt.Sprintf("%s %s: %s%v", e.Var, strconv.Quote(e.Path), pos, e.Err)
}

// Unwrap returns the underlying problem.
func (e *FileError) Unwrap() error { return e.Err }

// ReadFile reads the file at path, named by variable varName, into v (a
// pointer to a struct) strictly ([decode]). what says what
// the top-level object holds, for the message about an empty file. The
// error is a *FileError.
func ReadFile(varName, path string, v any, what string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		// The *PathError repeats the path; keep only its cause.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("read: %w", pe.Err)
		}
		return &FileError{Var: varName, Path: path, Err: err}
	}
	if off, err := decode(data, v, what); err != nil {
		e := &FileError{Var: varName, Path: path, Err: err}
		if off >= 0 {
			e.Line, e.Column = position(data, off)
		}
		return e
	}
	return nil
}

// decode parses data into v strictly: no unknown field, no member
// repeated in an object, no field name in another case
// ([checkStrictJSON]), nothing after the object. On error it also
// returns the byte offset the error is at, or -1.
func decode(data []byte, v any, what string) (int64, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		if dec.More() {
			off := dec.InputOffset()
			off += int64(len(data[off:]) - len(bytes.TrimLeft(data[off:], " \t\r\n")))
			return off + 1, errors.New("unexpected data after the top-level object")
		}
		// encoding/json keeps the last of repeated members and matches
		// names case-insensitively; the file must say what it means.
		if err := checkStrictJSON(data, reflect.TypeOf(v)); err != nil {
			return strictOffset(err), err
		}
		return -1, nil
	case errors.Is(err, io.EOF):
		return -1, fmt.Errorf("empty file: want a JSON object with %s", what)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return int64(len(data)), errors.New("unexpected end of file")
	case errors.As(err, &syntax):
		return syntax.Offset, err
	case errors.As(err, &typ):
		return typ.Offset, fmt.Errorf("%s: got a JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
	}
	return unknownFieldOffset(data, err), err
}

// unknownFieldOffset returns the offset just past the first object key
// that err, an unknown-field error of encoding/json, names, or -1. The
// decoder reports no position for that error, and a line:column is what
// an operator needs to find the typo.
func unknownFieldOffset(data []byte, err error) int64 {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return -1
	}
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(name))
		if j < 0 {
			return -1
		}
		i += j + len(name)
		if rest := bytes.TrimLeft(data[i:], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
			return int64(i - len(name) + 1)
		}
	}
}

// jsonKind names what a JSON value decoding into t must be.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// position converts a byte offset into data to a 1-based line and column.
// encoding/json's offsets point just past the offending byte.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 1), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

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
// tenants file and the policy file).
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
