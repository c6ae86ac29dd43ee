package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCheckStrictJSON(t *testing.T) {
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
	typ := reflect.TypeFor[doc]()
	tests := []struct {
		name, in string
		want     string // "" for no error; else a fragment of it
		path     string // the error's path, when a strictJSONError
	}{
		{"valid", `{"items": [{"name": "a", "tags": ["x"], "extra": {"k": [1, {"z": null}]}, "Plain": 1}], "one": {"name": "b"}}`, "", ""},
		{"empty object", `{}`, "", ""},
		{"null pointer", `{"one": null}`, "", ""},
		{"repeated top-level", `{"items": [], "items": []}`, `repeated member "items"`, "items"},
		{"repeated in an array element", `{"items": [{"name": "a"}, {"name": "b", "name": "c"}]}`, `repeated member "name"`, "items[1].name"},
		{"repeated behind a pointer", `{"one": {"tags": [], "tags": []}}`, `repeated member "tags"`, "one.tags"},
		{"repeated in a map", `{"items": [{"extra": {"k": 1, "k": 2}}]}`, `repeated member "k"`, "items[0].extra.k"},
		{"repeated deep in a map", `{"items": [{"extra": {"k": [{"a": 1, "a": 1}]}}]}`, `repeated member "a"`, "items[0].extra.k[0].a"},
		{"other case", `{"Items": []}`, `unknown field "Items" (field names are case-sensitive: want "items")`, "Items"},
		{"other case, inner", `{"one": {"NAME": "x"}}`, `want "name"`, "one.NAME"},
		{"untagged field in another case", `{"one": {"plain": 1}}`, `want "Plain"`, "one.plain"},
		{"unknown", `{"items": [{"nmae": "x"}]}`, `unknown field "nmae"`, "items[0].nmae"},
		{"skipped field", `{"one": {"Skip": "x"}}`, `unknown field "Skip"`, "one.Skip"},
		{"wrong kind is the decoder's business", `{"items": {"name": 1}, "one": [1]}`, "", ""},
		{"syntax error", `{"items": [}`, "invalid character", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkStrictJSON([]byte(tt.in), typ)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkStrictJSON(%s) = %v, want nil", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkStrictJSON(%s) = %v, want an error with %q", tt.in, err, tt.want)
			}
			var se *strictJSONError
			var syn *json.SyntaxError
			switch {
			case errors.As(err, &se):
				if se.Path != tt.path || se.Offset <= 0 || se.Offset > int64(len(tt.in)) {
					t.Errorf("error path %q offset %d, want path %q and an offset in the input", se.Path, se.Offset, tt.path)
				}
			case errors.As(err, &syn):
			default:
				t.Errorf("error %T, want *strictJSONError or *json.SyntaxError", err)
			}
		})
	}
}
