// Package strictjson decodes the JSON files an operator writes (the
// tenants file, the policy file) strictly, with
// github.com/go-json-experiment/json: no member name repeated in an
// object, no unknown field, no field name in another case, nothing after
// the top-level value, no invalid UTF-8. Errors name the variable, the
// file, the line:column and the field path (a JSON pointer, as
// tenants[0].id), and never quote a string of the file (it may carry
// secrets such as API keys).
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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

// MaxFileSize is the largest file ReadFile reads: a path that names a
// log by mistake (a file of gigabytes) is refused, not read into memory
// until the process runs out of it. A device (/dev/zero) or a pipe is
// read only up to its first byte that no JSON holds.
const MaxFileSize = 256 << 20

// errTooLarge is a file past MaxFileSize.
var errTooLarge = fmt.Errorf("larger than %d MiB: want a JSON file", MaxFileSize>>20)

// ReadFile reads the file at path, named by variable varName, into v (a
// pointer to a struct) strictly. what says what the top-level object
// holds, for the message about an empty file. A file larger than
// MaxFileSize is refused, and one that is not regular is read only up
// to a byte no JSON holds. The error is a *FileError.
func ReadFile(varName, path string, v any, what string) error {
	data, err := readBounded(path)
	if err != nil {
		// The *PathError repeats the path; keep only its cause.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("read: %w", pe.Err)
		}
		return &FileError{Var: varName, Path: path, Err: err}
	}
	// Duplicate names are rejected by default, and names match exactly.
	err = json.Unmarshal(data, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		err = fmt.Errorf("empty file: want a JSON object with %s", what)
		return &FileError{Var: varName, Path: path, Err: err}
	}
	off, err := describe(err)
	e := &FileError{Var: varName, Path: path, Err: err}
	e.Line, e.Column = position(data, off)
	return e
}

// readBounded reads the file at path, at most MaxFileSize bytes of it
// (errTooLarge past them). A file that is not regular (a device such as
// /dev/zero, a pipe) has no size to refuse it by: its read stops after a
// byte that no JSON text holds ([untilNotJSON]), and the data up to there
// is returned for the parser to say where it went wrong.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileSize {
		return nil, errTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(&untilNotJSON{r: f}, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, errTooLarge
	}
	return data, nil
}

// untilNotJSON reads r, and ends after the read that brought a byte no
// JSON text holds ([notJSON]).
type untilNotJSON struct {
	r    io.Reader
	done bool
}

func (u *untilNotJSON) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	n, err := u.r.Read(p)
	u.done = notJSON(p[:n])
	return n, err
}

// notJSON reports whether p holds a byte that a JSON text never holds,
// anywhere: a control byte other than tab, CR and LF (RFC 8259 allows
// them neither between tokens nor unescaped in a string).
func notJSON(p []byte) bool {
	for _, c := range p {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}

// describe rewrites an error of json.Unmarshal in our words, without the
// values the library may quote (part of a string with a bad escape could
// be an API key), and returns the byte offset it is at.
func describe(err error) (int64, error) {
	var (
		sem *json.SemanticError
		syn *jsontext.SyntacticError
	)
	switch {
	case errors.As(err, &sem) && sem.Err == json.ErrUnknownName:
		name := sem.JSONPointer.LastToken()
		msg := fmt.Sprintf("unknown field %q", name)
		if want := foldMatch(sem.GoType, name); want != "" {
			msg += fmt.Sprintf(" (field names are case-sensitive: want %q)", want)
		}
		return sem.ByteOffset, fmt.Errorf("%s%s", where(sem.JSONPointer), msg)
	case errors.As(err, &sem):
		got := kindName[sem.JSONKind]
		if sem.JSONKind == '0' && len(sem.JSONValue) > 0 { // a number is no secret
			got += " " + string(sem.JSONValue)
		}
		return sem.ByteOffset, fmt.Errorf("%sgot a JSON %s, want %s", where(sem.JSONPointer), got, jsonKind(sem.GoType))
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName:
		name := syn.JSONPointer.LastToken()
		return syn.ByteOffset, fmt.Errorf("%srepeated member %q: each name may appear once per object", where(syn.JSONPointer), name)
	case errors.As(err, &syn) && errors.Is(syn.Err, io.ErrUnexpectedEOF):
		return syn.ByteOffset, errors.New("unexpected end of file")
	case errors.As(err, &syn):
		msg, _, _ := strings.Cut(syn.Err.Error(), " `") // drop the quoted input
		return syn.ByteOffset, fmt.Errorf("%s%s", where(syn.JSONPointer), msg)
	}
	return -1, err
}

// where returns p as a field path such as "tenants[1].id: ", or "" at the top.
func where(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + ": "
}

// kindName names the kinds of JSON value a wrong one can be.
var kindName = map[jsontext.Kind]string{
	'"': "string", '0': "number", '{': "object", '[': "array", 't': "boolean", 'f': "boolean", 'n': "null",
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

// foldMatch returns the json name of a field of struct t that equals
// name but for case, or "".
func foldMatch(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || tag == "-":
			continue
		case tag == "":
			tag = f.Name
		}
		if strings.EqualFold(tag, name) {
			return tag
		}
	}
	return ""
}

// position converts a 0-based byte offset into data to a 1-based line and
// column; 0, 0 for a negative offset.
func position(data []byte, off int64) (line, col int) {
	if off < 0 {
		return 0, 0
	}
	before := data[:min(off, int64(len(data)))]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}
