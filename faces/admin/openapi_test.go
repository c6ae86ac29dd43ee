package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/internal/watch"
)

// openAPIPath is the OpenAPI description of the admin listener, from this
// package's directory.
const openAPIPath = "../../docs/admin-openapi.json"

// usagePath is the usage call whose answer the document's schemas describe.
const usagePath = "/v1/tenants/{id}/usage"

// pingerFunc is a store readiness check (ports.Pinger) made of a function.
type pingerFunc func(context.Context) error

func (f pingerFunc) Ping(ctx context.Context) error { return f(ctx) }

// openAPIDoc is the decoded document, with a resolver for its local
// references.
type openAPIDoc struct {
	root map[string]any
}

// loadOpenAPI reads and decodes the document, failing t when it is not
// JSON or not OpenAPI 3.1.
func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("the admin listener's OpenAPI description: %v", err)
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatalf("%s is not JSON: %v", openAPIPath, err)
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("%s: openapi %q, want 3.1.x", openAPIPath, root["openapi"])
	}
	return openAPIDoc{root}
}

// object returns v as a JSON object, after following a "$ref" to
// another part of the document; it fails t, naming where, when v is not
// an object or the reference leads nowhere.
func (d openAPIDoc) object(t *testing.T, v any, where string) map[string]any {
	t.Helper()
	for range 8 { // a chain of references, never a loop
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is %T, want a JSON object", openAPIPath, where, v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if !strings.HasPrefix(ref, "#/") {
			t.Fatalf("%s: %s refers to %q, want a reference inside the document (#/...)", openAPIPath, where, ref)
		}
		v = any(d.root)
		for _, part := range strings.Split(ref[2:], "/") {
			part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
			obj, ok := v.(map[string]any)
			if !ok || obj[part] == nil {
				t.Fatalf("%s: %s refers to %q, which is not in the document", openAPIPath, where, ref)
			}
			v = obj[part]
		}
		where = ref
	}
	t.Fatalf("%s: %s: references nested too deep", openAPIPath, where)
	return nil
}

// at follows keys from obj, each an object, failing t when one is missing.
func (d openAPIDoc) at(t *testing.T, obj map[string]any, where string, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		where += "." + k
		obj = d.object(t, obj[k], where)
	}
	return obj
}

// operations returns every "METHOD path" the document describes.
func (d openAPIDoc) operations(t *testing.T) []string {
	t.Helper()
	var ops []string
	for path, item := range d.object(t, d.root["paths"], "paths") {
		for key := range d.object(t, item, "paths."+path) {
			switch m := strings.ToUpper(key); m {
			case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
				http.MethodDelete, http.MethodOptions, http.MethodTrace:
				ops = append(ops, m+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// servedOperations returns every "METHOD path" the admin listener routes
// with the usage and key APIs on: admin.New's own paths, admin.WithUsage's,
// admin.WithKeys' and admin.WithTop's.
func servedOperations(t *testing.T) []string {
	t.Helper()
	base := admin.New(pingerFunc(func(context.Context) error { return nil }), time.Second, prometheus.NewRegistry(), nil)
	f := newFixture(t, nil, nil)
	withUsage := admin.WithUsage(base, admin.UsageOptions{Engine: f.eng, Token: token})
	withKeys := newKeysFixture(t, 0).h
	w := watch.New(watch.Options{Top: 3})
	t.Cleanup(func() { w.Close() })
	withTop := admin.WithTop(withUsage, admin.TopOptions{Engine: f.eng, Watch: w, Token: token})
	var ops []string
	for name, h := range map[string]http.Handler{"admin.New": base, "admin.WithUsage": withUsage, "admin.WithKeys": withKeys, "admin.WithTop": withTop} {
		routes, ok := h.(chi.Routes)
		if !ok {
			t.Fatalf("%s returns a %T, no longer a chi router: list its routes another way here", name, h)
		}
		err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			ops = append(ops, method+" "+route)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(ops)
	return slices.Compact(ops)
}

// TestOpenAPIDescribesEveryRoute: the document lists exactly the paths
// and methods the admin listener serves with the usage API on, and the
// usage API's operations, alone, need the bearer token.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	documented, served := d.operations(t), servedOperations(t)
	if len(served) < 5 {
		t.Fatalf("the admin listener routes %v: fewer than /healthz, /readyz, /metrics and the usage API's two", served)
	}
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("the admin listener serves %s, which %s does not describe", op, openAPIPath)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("%s describes %s, which the admin listener does not serve", openAPIPath, op)
		}
	}

	scheme := d.at(t, d.root, "", "components", "securitySchemes", "bearerAuth")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("components.securitySchemes.bearerAuth = %v, want type http, scheme bearer", scheme)
	}
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		o := d.at(t, d.root, "", "paths", path, strings.ToLower(method))
		raw, _ := json.Marshal(o["security"])
		switch v1 := strings.HasPrefix(path, "/v1/"); {
		case v1 && string(raw) != `[{"bearerAuth":[]}]`:
			t.Errorf("%s: security %s, want [{\"bearerAuth\":[]}]: every call of the usage API needs the token", op, raw)
		case !v1 && string(raw) != "[]" && string(raw) != "null":
			t.Errorf("%s: security %s, want none: only the usage API needs the token", op, raw)
		}
	}
}

// TestOpenAPIUsageSchema: the schema of the usage API's answer, for a
// read and for a reset, has the json fields of admin.UsageBody and, for
// its limits, of admin.LimitBody: the same names, the same JSON types,
// and required unless the field is omitempty.
func TestOpenAPIUsageSchema(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	for _, op := range []struct{ path, method string }{
		{usagePath, "get"},
		{"/v1/tenants/{id}/reset", "post"},
	} {
		where := op.method + " " + op.path + " 200"
		resp := d.at(t, d.root, "", "paths", op.path, op.method, "responses", "200")
		schema := d.at(t, resp, where, "content", "application/json", "schema")
		checkSchema(t, d, schema, reflect.TypeFor[admin.UsageBody](), where)
	}
}

// checkSchema fails t where schema, an object schema, and typ, a struct
// the API encodes with encoding/json, part: a property without a field
// or a field without a property, another JSON type, or a required list
// other than the fields without omitempty. It checks struct fields, and
// arrays of them, the same way.
func checkSchema(t *testing.T, d openAPIDoc, schema map[string]any, typ reflect.Type, where string) {
	t.Helper()
	if schema["type"] != "object" {
		t.Errorf("%s: type %v, want object (%s)", where, schema["type"], typ)
	}
	props := d.object(t, schema["properties"], where+".properties")
	var names, required []string
	for i := range typ.NumField() {
		field := typ.Field(i)
		name, opts, _ := strings.Cut(field.Tag.Get("json"), ",")
		if !field.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = field.Name
		}
		names = append(names, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
		at := where + ".properties." + name
		p, ok := props[name]
		if !ok {
			t.Errorf("%s: no property %q for %s.%s", where, name, typ.Name(), field.Name)
			continue
		}
		prop := d.object(t, p, at)
		want := jsonType(field.Type)
		if prop["type"] != want {
			t.Errorf("%s: type %v, want %s (%s.%s is %s)", at, prop["type"], want, typ.Name(), field.Name, field.Type)
		}
		switch {
		case field.Type.Kind() == reflect.Struct:
			checkSchema(t, d, prop, field.Type, at)
		case field.Type.Kind() == reflect.Slice && field.Type.Elem().Kind() == reflect.Struct:
			checkSchema(t, d, d.object(t, prop["items"], at+".items"), field.Type.Elem(), at+".items")
		}
	}
	for name := range props {
		if !slices.Contains(names, name) {
			t.Errorf("%s: property %q, which %s does not have (its json tags: %v)", where, name, typ.Name(), names)
		}
	}
	var documented []string
	if list, ok := schema["required"].([]any); ok {
		for _, r := range list {
			s, _ := r.(string)
			documented = append(documented, s)
		}
	}
	sort.Strings(required)
	sort.Strings(documented)
	if !slices.Equal(documented, required) {
		t.Errorf("%s: required %v, want %v (the fields of %s without omitempty)", where, documented, required, typ.Name())
	}
}

// jsonType is the JSON Schema type encoding/json gives a value of t (a
// pointer's: its element's, absent when nil with omitempty).
func jsonType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// TestOpenAPIUsageStatuses: each operation of the usage API lists every
// status its handler answers (TestUsageBadRequests, TestUsageReset and
// TestUsageStoreFails see each of them), and no other.
func TestOpenAPIUsageStatuses(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	want := []string{"200", "400", "401", "404", "405", "503"}
	for _, op := range []struct{ path, method string }{
		{usagePath, "get"},
		{"/v1/tenants/{id}/reset", "post"},
	} {
		resps := d.at(t, d.root, "", "paths", op.path, op.method, "responses")
		var got []string
		for code := range resps {
			got = append(got, code)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: responses %v, want %v", op.method, op.path, got, want)
		}
	}
}
