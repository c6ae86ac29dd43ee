package app_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/strictjson"
	"github.com/tollgate/tollgate/ports"
)

var defaultRule = domain.Rule{Limit: 100, Window: time.Minute}

const twoTenants = `{"tenants": [
  {"id": "acme",   "api_keys": ["k-acme-1", "k-acme-2"], "limit": 1000, "window": "10s"},
  {"id": "globex", "api_keys": ["k-globex"]}
]}`

// fileTenants is a tenants file loaded under the policy of no policy
// file (defaultRule), and its resolver: the engine, reading requests as
// the HTTP faces do.
type fileTenants struct {
	path string
	dir  *engine.Directory
	eng  *engine.Engine
}

func loadFileTenants(t testing.TB, path string) (*fileTenants, error) {
	t.Helper()
	p := domain.DefaultPolicy(defaultRule, false)
	dir, err := app.LoadTenantsFile(path, p)
	if err != nil {
		return nil, err
	}
	eng := engine.New(&engine.Snapshot{Policy: p, Tenants: dir}, engine.Options{Keys: keys.Layout{}, Limiter: ports.LimiterFunc(nil)})
	return &fileTenants{path, dir, eng}, nil
}

// resolve returns the tenant r presents.
func (f *fileTenants) resolve(r *http.Request) engine.Tenant {
	return f.eng.Resolve(httpface.Describer{}.Describe(r, r.Method, "/").Credentials)
}

// reload loads the file again into f, as SIGHUP does: all or nothing.
func (f *fileTenants) reload(t testing.TB) error {
	p := domain.DefaultPolicy(defaultRule, false)
	dir, err := app.LoadTenantsFile(f.path, p)
	if err != nil {
		return err
	}
	f.dir = dir
	f.eng.Swap(&engine.Snapshot{Policy: p, Tenants: dir})
	return nil
}

func TestFileTenantsResolve(t *testing.T) {
	t.Parallel()
	ft, err := loadFileTenants(t, writeTenants(t, twoTenants))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ft.dir.Len(), 2; got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
	acme := engine.Tenant{ID: "acme", Rules: map[string]domain.Rule{"default": {Limit: 1000, Window: 10 * time.Second}}}
	globex := engine.Tenant{ID: "globex"}
	unknown := engine.Tenant{ID: domain.Unknown}
	tests := []struct {
		name    string
		headers map[string]string
		want    engine.Tenant
	}{
		{"bearer", map[string]string{"Authorization": "Bearer k-acme-1"}, acme},
		{"bearer second key", map[string]string{"Authorization": "Bearer k-acme-2"}, acme},
		{"bearer scheme is case-insensitive", map[string]string{"Authorization": "bearer k-globex"}, globex},
		{"bearer with extra spaces", map[string]string{"Authorization": "Bearer   k-globex"}, globex},
		{"x-api-key", map[string]string{"X-API-Key": "k-globex"}, globex},
		{"x-api-key any case", map[string]string{"x-api-key": "k-acme-1"}, acme},
		{"both: x-api-key wins", map[string]string{"X-API-Key": "k-globex", "Authorization": "Bearer k-acme-1"}, globex},
		{"both, x-api-key unknown: the bearer key", map[string]string{"X-API-Key": "nope", "Authorization": "Bearer k-acme-1"}, acme},
		{"both unknown", map[string]string{"X-API-Key": "nope", "Authorization": "Bearer nope"}, unknown},
		{"empty x-api-key: bearer", map[string]string{"X-API-Key": "", "Authorization": "Bearer k-acme-1"}, acme},
		{"missing", nil, unknown},
		{"unknown key", map[string]string{"X-API-Key": "k-acme-3"}, unknown},
		{"key prefix", map[string]string{"X-API-Key": "k-acme-"}, unknown},
		{"tenant header ignored", map[string]string{"X-Tenant-ID": "acme"}, unknown},
		{"tenant header ignored with key", map[string]string{"X-Tenant-ID": "acme", "X-API-Key": "k-globex"}, globex},
		{"malformed: bearer without key", map[string]string{"Authorization": "Bearer"}, unknown},
		{"malformed: bearer and spaces", map[string]string{"Authorization": "Bearer    "}, unknown},
		{"malformed: no space", map[string]string{"Authorization": "Bearerk-acme-1"}, unknown},
		{"malformed: basic scheme", map[string]string{"Authorization": "Basic k-acme-1"}, unknown},
		{"malformed: key alone", map[string]string{"Authorization": "k-acme-1"}, unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			if got := ft.resolve(r); !sameTenant(got, tt.want) {
				t.Errorf("ResolveTenant(%v) = %+v, want %+v", tt.headers, got, tt.want)
			}
		})
	}
}

// badTenantsFiles are tenants files that must be rejected, each with a
// fragment the error must contain. No error may contain "SECRET", which
// every API key here holds.
var badTenantsFiles = []struct {
	name, content, want string
}{
	{"empty file", ``, "empty file"},
	{"syntax error", "{\"tenants\": [\n  {\"id\": \"acme\" \"api_keys\": [\"SECRET1\"]}\n]}", `2:17: tenants[0]: invalid character '"' after object value (expecting ',' or '}')`},
	{"truncated", "{\"tenants\": [\n  {\"id\": \"acme\"", "2:16: unexpected end of file"},
	{"type error", "{\"tenants\": [\n  {\"id\": \"acme\", \"api_keys\": [\"SECRET1\"], \"limit\": \"10\"}]}", `2:52: tenants[0].limit: got a JSON string, want an integer`},
	{"unknown field", "{\"tenants\": [\n  {\"id\": \"acme\", \"api_keys\": [\"SECRET1\"],\n   \"limt\": 10}]}", `3:4: tenants[0].limt: unknown field "limt"`},
	{"trailing data", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"]}]} {}`, "1:56: invalid character '{' after top-level value"},
	{"not an object", `[]`, "got a JSON array, want an object"},
	{"tenants twice", "{\"tenants\": [{\"id\": \"acme\", \"api_keys\": [\"SECRET1\"]}],\n \"tenants\": [{\"id\": \"globex\", \"api_keys\": [\"SECRET2\"]}]}",
		`2:2: tenants: repeated member "tenants"`},
	{"id twice", "{\"tenants\": [\n  {\"id\": \"acme\", \"api_keys\": [\"SECRET1\"], \"id\": \"globex\"}]}",
		`2:43: tenants[0].id: repeated member "id"`},
	{"key list twice", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"]}, {"id": "b", "api_keys": ["SECRET2"], "api_keys": ["SECRET3"]}]}`,
		`tenants[1].api_keys: repeated member "api_keys"`},
	{"field in another case", "{\"tenants\": [\n  {\"ID\": \"acme\", \"api_keys\": [\"SECRET1\"]}]}",
		`2:4: tenants[0].ID: unknown field "ID" (field names are case-sensitive: want "id")`},
	{"top-level field in another case", `{"Tenants": [{"id": "acme", "api_keys": ["SECRET1"]}]}`,
		`1:2: Tenants: unknown field "Tenants" (field names are case-sensitive: want "tenants")`},
	{"limit in another case", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "Limit": 5}]}`,
		`tenants[0].Limit: unknown field "Limit"`},
	{"no tenants", `{"tenants": []}`, "no tenants"},
	{"no tenants field", `{}`, "no tenants"},
	{"duplicate id", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"]}, {"id": "acme", "api_keys": ["SECRET2"]}]}`,
		`tenants[1] (id "acme"): duplicate id, also tenants[0]`},
	{"duplicate key across tenants", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"]}, {"id": "globex", "api_keys": ["x", "SECRET1"]}]}`,
		`tenants[1] (id "globex"): api_keys[1]: duplicate API key, also tenants[0] api_keys[0]`},
	{"duplicate key in one tenant", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1", "SECRET1"]}]}`,
		`api_keys[1]: duplicate API key, also tenants[0] api_keys[0]`},
	{"invalid id", `{"tenants": [{"id": "ac me", "api_keys": ["SECRET1"]}]}`, `tenants[0] (id "ac me"): invalid tenant id`},
	{"empty id", `{"tenants": [{"api_keys": ["SECRET1"]}]}`, `tenants[0] (id ""): invalid tenant id`},
	{"id too long", `{"tenants": [{"id": "` + strings.Repeat("a", 65) + `", "api_keys": ["SECRET1"]}]}`, "invalid tenant id: length 65"},
	{"reserved id", `{"tenants": [{"id": "unknown", "api_keys": ["SECRET1"]}]}`, `id "unknown" is reserved`},
	{"no api_keys", `{"tenants": [{"id": "acme"}]}`, "no api_keys"},
	{"empty api_keys", `{"tenants": [{"id": "acme", "api_keys": []}]}`, "no api_keys"},
	{"empty api_key_sha256", `{"tenants": [{"id": "acme", "api_key_sha256": []}]}`, "no api_keys nor api_key_sha256"},
	{"digest not hex", `{"tenants": [{"id": "acme", "api_key_sha256": ["zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"]}]}`, "api_key_sha256[0]: want the SHA-256 of a key, 64 hex digits"},
	{"digest too short", `{"tenants": [{"id": "acme", "api_key_sha256": ["03153249db7ce46b0330ffb1a760b59710531af08ec4d7f8424a6870fae493"]}]}`, "api_key_sha256[0]: want the SHA-256 of a key, 64 hex digits"},
	{"digest too long", `{"tenants": [{"id": "acme", "api_key_sha256": ["03153249db7ce46b0330ffb1a760b59710531af08ec4d7f8424a6870fae4936000"]}]}`, "api_key_sha256[0]: want the SHA-256 of a key, 64 hex digits"},
	{"a key and its digest", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"]}, {"id": "globex", "api_key_sha256": ["03153249DB7CE46B0330FFB1A760B59710531AF08EC4D7F8424A6870FAE49360"]}]}`,
		`tenants[1] (id "globex"): api_key_sha256[0]: duplicate API key, also tenants[0] api_keys[0]`},
	{"empty key", `{"tenants": [{"id": "acme", "api_keys": [""]}]}`, "api_keys[0]: want 1 or more bytes of printable ASCII"},
	{"key with a space", `{"tenants": [{"id": "acme", "api_keys": ["SECRET 1"]}]}`, "api_keys[0]: want 1 or more bytes"},
	{"limit 0", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "limit": 0}]}`, "limit 0: want an integer from 1 to 1000000000"},
	{"negative limit", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "limit": -5}]}`, "limit -5: want an integer from 1 to 1000000000"},
	{"unparsable window", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "window": "soon"}]}`, `window "soon": want a Go duration from 1ms to 8784h0m0s`},
	{"window too short", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "window": "500us"}]}`, `window "500us": want a Go duration from 1ms to 8784h0m0s`},
	{"rate too high", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "limit": 2000, "window": "1ms"}]}`, "more than one request per 1µs"},
	{"window as a number", `{"tenants": [{"id": "acme", "api_keys": ["SECRET1"], "window": 60}]}`, "tenants[0].window: got a JSON number, want a string"},
	{"every problem reported", `{"tenants": [{"id": "unknown", "api_keys": ["SECRET1"]}, {"id": "b", "api_keys": ["SECRET2"], "limit": 0}]}`,
		`tenants[0] (id "unknown"): id "unknown" is reserved for unresolved traffic; tenants[1] (id "b"): limit 0`},
}

// TestTenantsFileDigests: a key given by its SHA-256 (either case)
// resolves its tenant as the key itself does, beside api_keys.
func TestTenantsFileDigests(t *testing.T) {
	t.Parallel()
	f, err := loadFileTenants(t, writeTenants(t, `{"tenants": [
	  {"id": "acme", "api_keys": ["k-acme"], "api_key_sha256": ["C68675C52D1FC2AAB2F74220543A027718F5E2B846AD2C75BD2501952E9D5F57"]},
	  {"id": "globex", "api_key_sha256": ["03153249db7ce46b0330ffb1a760b59710531af08ec4d7f8424a6870fae49360"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]domain.TenantID{"k-acme": "acme", "k-hooli": "acme", "SECRET1": "globex", "03153249db7ce46b0330ffb1a760b59710531af08ec4d7f8424a6870fae49360": domain.Unknown} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", key)
		if got := f.resolve(r).ID; got != want {
			t.Errorf("key %q resolves to %s, want %s", key, got, want)
		}
	}
}

// TestBadTenantsFile checks each bad file twice: LoadTenantsFile returns
// a *strictjson.FileError, and Run exits 2 with it, before listening.
func TestBadTenantsFile(t *testing.T) {
	t.Parallel()
	for _, tt := range badTenantsFiles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeTenants(t, tt.content)
			_, err := loadFileTenants(t, path)
			var fe *strictjson.FileError
			if !errors.As(err, &fe) || fe.Path != path || fe.Var != "TOLLGATE_TENANTS_FILE" {
				t.Errorf("LoadTenantsFile: error %v is not a *FileError for TOLLGATE_TENANTS_FILE %s", err, path)
			}
			checkTenantsFileError(t, "LoadFileTenants", err, path, tt.want)
			checkRunRejects(t, path, tt.want)
		})
	}
}

func TestMissingTenantsFile(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/nope.json"
	_, err := loadFileTenants(t, path)
	checkTenantsFileError(t, "LoadFileTenants", err, path, "read: no such file or directory")
	checkRunRejects(t, path, "read: no such file or directory")
}

// checkTenantsFileError checks that err is one line naming path and
// holding want, and no API key (every key in badTenantsFiles holds SECRET).
func checkTenantsFileError(t *testing.T, what string, err error, path, want string) {
	t.Helper()
	checkFileError(t, what, err, path, want)
}

// checkFileError checks that err is one line naming path and holding
// want, and no secret (every API key in the bad files holds SECRET).
func checkFileError(t *testing.T, what string, err error, path, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: nil error, want one", what)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Errorf("%s: error %q does not contain %q", what, msg, want)
	}
	if !strings.Contains(msg, path) || strings.Contains(msg, "\n") || strings.Contains(msg, "SECRET") {
		t.Errorf("%s: error %q: want one line naming %s and no API key", what, msg, path)
	}
}

// checkRunRejects checks that Run with the tenants file at path exits 2
// with an error that names the variable, the file and want.
func checkRunRejects(t *testing.T, path, want string) {
	t.Helper()
	checkRunRejectsFile(t, "TOLLGATE_TENANTS_FILE", path, want)
}

// checkRunRejectsFile checks that Run with variable set to path exits 2
// with an error that names the variable, the file and want.
func checkRunRejectsFile(t *testing.T, variable, path, want string) {
	t.Helper()
	var stderr logtest.Buffer
	err := app.Run(t.Context(), []string{"tollgate"}, []string{
		variable + "=" + path,
		"TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0",
	}, &logtest.Buffer{}, &stderr)
	if got, want := app.ExitCode(err), 2; got != want {
		t.Fatalf("ExitCode(Run) = %d (%v), want %d", got, err, want)
	}
	if !strings.HasPrefix(err.Error(), "tollgate: "+variable+" ") {
		t.Errorf("Run: error %q does not start with tollgate: %s", err, variable)
	}
	checkFileError(t, "Run", err, path, want)
	if strings.Contains(stderr.String(), "SECRET") {
		t.Errorf("log holds an API key: %s", stderr.String())
	}
}

func TestFileTenantsReload(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, twoTenants)
	ft, err := loadFileTenants(t, path)
	if err != nil {
		t.Fatal(err)
	}
	req := func(key string) engine.Tenant {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", key)
		return ft.resolve(r)
	}

	// A good file replaces the table: a new tenant, a new budget, a key
	// that moved, and one revoked.
	rewrite(t, path, `{"tenants": [
	  {"id": "acme", "api_keys": ["k-acme-1"], "limit": 5},
	  {"id": "initech", "api_keys": ["k-acme-2", "k-initech"]}
	]}`)
	if err := ft.reload(t); err != nil {
		t.Fatalf("Reload(good file) = %v", err)
	}
	check := func(when, key string, want engine.Tenant) {
		t.Helper()
		if got := req(key); !sameTenant(got, want) {
			t.Errorf("%s: key %s resolves to %+v, want %+v", when, key, got, want)
		}
	}
	acme5 := engine.Tenant{ID: "acme", Rules: map[string]domain.Rule{"default": {Limit: 5, Window: time.Minute}}}
	initech := engine.Tenant{ID: "initech"}
	unknown := engine.Tenant{ID: domain.Unknown}
	check("after good reload", "k-acme-1", acme5)
	check("after good reload", "k-acme-2", initech)
	check("after good reload", "k-initech", initech)
	check("after good reload", "k-globex", unknown)
	if got, want := ft.dir.Len(), 2; got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}

	// A bad file is rejected and the table stays.
	rewrite(t, path, `{"tenants": [{"id": "acme", "api_keys": ["k-acme-1"], "limit": 0}]}`)
	if err := ft.reload(t); err == nil || !strings.Contains(err.Error(), "limit 0") {
		t.Errorf("Reload(bad file) = %v, want the limit error", err)
	}
	check("after bad reload", "k-acme-1", acme5)
	check("after bad reload", "k-initech", initech)

	// So is one that encoding/json alone would accept: a repeated id,
	// whose last value would win, and a field in another case.
	for _, bad := range []string{
		`{"tenants": [{"id": "acme", "id": "hooli", "api_keys": ["k-acme-1"]}]}`,
		`{"tenants": [{"ID": "hooli", "api_keys": ["k-acme-1"]}]}`,
	} {
		rewrite(t, path, bad)
		if err := ft.reload(t); err == nil {
			t.Errorf("Reload(%s) = nil, want an error", bad)
		}
		check("after a lax reload", "k-acme-1", acme5)
	}
}

// sameTenant reports whether got is want in id and own rules.
func sameTenant(got, want engine.Tenant) bool {
	if got.ID != want.ID || len(got.Rules) != len(want.Rules) {
		return false
	}
	for name, r := range want.Rules {
		if got.Rules[name] != r {
			return false
		}
	}
	return true
}

// rewrite replaces the file at path with content.
func rewrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkFileTenantsResolve is the per-request cost of API-key
// resolution, as the HTTP faces read a request: one SHA-256 and one map
// lookup, no allocation.
func BenchmarkFileTenantsResolve(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tenants.json")
	if err := os.WriteFile(path, []byte(twoTenants), 0o600); err != nil {
		b.Fatal(err)
	}
	ft, err := loadFileTenants(b, path)
	if err != nil {
		b.Fatal(err)
	}
	for _, h := range []struct{ name, header, value string }{
		{"bearer", "Authorization", "Bearer k-acme-1"},
		{"x-api-key", "X-API-Key", "k-globex"},
		{"unknown", "X-API-Key", "not-a-key"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(h.header, h.value)
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ft.resolve(r)
			}
		})
	}
}
