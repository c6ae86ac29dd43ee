package strictjson_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/internal/strictjson"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	type inner struct {
		Name  string         `json:"name"`
		Tags  []string       `json:"tags,omitempty"`
		Extra map[string]any `json:"extra"`
		Skip  string         `json:"-"`
		Plain int
	}
	type doc struct {
		Items []inner `json:"items"`
		One   *inner  `json:"one"`
	}
	tests := []struct {
		name, in string
		want     string // "" for no error; else a fragment of it
	}{
		{"valid", `{"items": [{"name": "a", "tags": ["x"], "extra": {"k": [1, {"z": null}]}, "Plain": 1}], "one": {"name": "b"}}`, ""},
		{"empty object", `{}`, ""},
		{"null pointer", `{"one": null}`, ""},
		{"repeated top-level", `{"items": [], "items": []}`, `items: repeated member "items"`},
		{"repeated in an array element", `{"items": [{"name": "a"}, {"name": "b", "name": "c"}]}`, `items[1].name: repeated member "name"`},
		{"repeated behind a pointer", `{"one": {"tags": [], "tags": []}}`, `one.tags: repeated member "tags"`},
		{"repeated in a map", `{"items": [{"extra": {"k": 1, "k": 2}}]}`, `items[0].extra.k: repeated member "k"`},
		{"repeated deep in a map", `{"items": [{"extra": {"k": [{"a": 1, "a": 1}]}}]}`, `items[0].extra.k[0].a: repeated member "a"`},
		{"other case", `{"Items": []}`, `Items: unknown field "Items" (field names are case-sensitive: want "items")`},
		{"other case, inner", `{"one": {"NAME": "x"}}`, `one.NAME: unknown field "NAME" (field names are case-sensitive: want "name")`},
		{"untagged field in another case", `{"one": {"plain": 1}}`, `one.plain: unknown field "plain" (field names are case-sensitive: want "Plain")`},
		{"unknown", `{"items": [{"nmae": "x"}]}`, `items[0].nmae: unknown field "nmae"`},
		{"skipped field", `{"one": {"Skip": "x"}}`, `one.Skip: unknown field "Skip"`},
		{"wrong kind", `{"items": {"name": 1}}`, `items: got a JSON object, want an array`},
		{"syntax error", `{"items": [}`, "1:12: items[0]: invalid character '}' at start of value"},
		{"invalid UTF-8", "{\"one\": {\"name\": \"SECRET\xff\"}}", "one.name: invalid UTF-8"},
		{"bad escape holds no secret", `{"one": {"name": "\ud800SECRET"}}`, "1:19: one.name: invalid surrogate pair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f.json")
			if err := os.WriteFile(path, []byte(tt.in), 0o600); err != nil {
				t.Fatal(err)
			}
			var v doc
			err := strictjson.ReadFile("TOLLGATE_X", path, &v, "items")
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ReadFile(%s) = %v, want nil", tt.in, err)
				}
				return
			}
			var fe *strictjson.FileError
			if !errors.As(err, &fe) || fe.Var != "TOLLGATE_X" || fe.Path != path || fe.Line == 0 {
				t.Fatalf("ReadFile(%s) = %v, want a *FileError with a position", tt.in, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "SECRET") {
				t.Fatalf("ReadFile(%s) = %q, want an error with %q and no SECRET", tt.in, msg, tt.want)
			}
		})
	}
}

// TestReadFileTooLarge: a file past MaxFileSize is refused before it is
// read (a path naming a huge file by mistake took all the memory).
func TestReadFileTooLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, strictjson.MaxFileSize+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	var v struct{}
	err := strictjson.ReadFile("TOLLGATE_X", path, &v, "items")
	if err == nil || !strings.Contains(err.Error(), `TOLLGATE_X "`+path+`": larger than 256 MiB`) {
		t.Errorf("ReadFile of %d bytes = %v, want larger than 256 MiB", strictjson.MaxFileSize+1, err)
	}
}

// TestReadFileStopsAtBytesNoJSONHolds: a path that is no regular file
// (a device such as /dev/zero or /dev/urandom, a pipe) has no size to
// refuse it by; a byte that JSON never holds (NUL, another control byte
// than tab, CR or LF) ends the read there, and the error is the JSON one.
// The bound alone read /dev/zero to 256 MiB first, over 500 MiB of heap.
func TestReadFileStopsAtBytesNoJSONHolds(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fifo.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	written := make(chan int64, 1)
	go func() { // what /dev/zero would give, up to 300 MiB
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			written <- -1
			return
		}
		defer f.Close()
		var n int64
		zeros := make([]byte, 64<<10)
		for n < 300<<20 {
			m, err := f.Write(zeros)
			n += int64(m)
			if err != nil {
				break // the reader is gone
			}
		}
		written <- n
	}()
	var v struct{}
	err := strictjson.ReadFile("TOLLGATE_X", path, &v, "items")
	if err == nil || !strings.Contains(err.Error(), `TOLLGATE_X "`+path+`": 1:1: invalid character`) {
		t.Errorf("ReadFile of a stream of NUL bytes = %v, want the JSON error at 1:1", err)
	}
	if n := <-written; n < 0 || n > 16<<20 {
		t.Errorf("ReadFile of a stream of NUL bytes read %d bytes of it, want it to stop at the first ones", n)
	}
}
