package admin_test

import (
	"encoding/json"
	"slices"
	"sort"
	"testing"
)

// TestOpenAPIKeySchemas: the schemas of the key API's answers name
// exactly the fields a real answer has, all required, each of the JSON
// type the answer gives it (a null expires_at included).
func TestOpenAPIKeySchemas(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	f := newKeysFixture(t, 0)
	created := f.do(t, "POST", "/v1/tenants/acme/keys", "")
	f.do(t, "POST", "/v1/tenants/acme/keys", `{"expires_in": "1h"}`)
	list := f.do(t, "GET", "/v1/tenants/acme/keys", "")
	for _, tt := range []struct {
		where  string
		body   []byte
		schema map[string]any
	}{
		{"post 201", created.Body.Bytes(), d.at(t, d.root, "", "paths", "/v1/tenants/{id}/keys", "post", "responses", "201", "content", "application/json", "schema")},
		{"get 200", list.Body.Bytes(), d.at(t, d.root, "", "paths", "/v1/tenants/{id}/keys", "get", "responses", "200", "content", "application/json", "schema")},
	} {
		var answer map[string]any
		if err := json.Unmarshal(tt.body, &answer); err != nil {
			t.Fatalf("%s: %v", tt.where, err)
		}
		checkAnswer(t, d, tt.schema, answer, tt.where)
	}
}

// checkAnswer fails t where answer, a JSON object, and schema part:
// another set of properties, a required list other than every property,
// or a value of another JSON type. It follows arrays of objects.
func checkAnswer(t *testing.T, d openAPIDoc, schema, answer map[string]any, where string) {
	t.Helper()
	props := d.object(t, schema["properties"], where+".properties")
	var documented, got, required []string
	for k := range props {
		documented = append(documented, k)
	}
	for k := range answer {
		got = append(got, k)
	}
	for _, r := range schema["required"].([]any) {
		required = append(required, r.(string))
	}
	sort.Strings(documented)
	sort.Strings(got)
	sort.Strings(required)
	if !slices.Equal(documented, got) || !slices.Equal(required, got) {
		t.Errorf("%s: properties %v, required %v; the answer has %v", where, documented, required, got)
	}
	for k, v := range answer {
		p, ok := props[k]
		if !ok {
			continue
		}
		prop := d.object(t, p, where+"."+k)
		types := []string{}
		switch ty := prop["type"].(type) {
		case string:
			types = append(types, ty)
		case []any:
			for _, x := range ty {
				types = append(types, x.(string))
			}
		}
		if !slices.Contains(types, jsonKind(v)) {
			t.Errorf("%s.%s: type %v, the answer's is %s", where, k, prop["type"], jsonKind(v))
		}
		if items, ok := v.([]any); ok {
			for i, it := range items {
				if obj, ok := it.(map[string]any); ok {
					checkAnswer(t, d, d.object(t, prop["items"], where+"."+k+".items"), obj, where+"."+k+"["+string(rune('0'+i))+"]")
				}
			}
		}
	}
}

// jsonKind is the JSON Schema type of v, a decoded JSON value.
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}
