package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// Headers that carry a tenant's API key in tenants-file mode.
const (
	HeaderAPIKey        = "X-API-Key"
	HeaderAuthorization = "Authorization"
)

// apiKeyHeader is HeaderAPIKey in canonical form, so that looking it up
// does not canonicalize (and allocate) on every request.
var apiKeyHeader = http.CanonicalHeaderKey(HeaderAPIKey)

// FileTenants resolves tenants by API key from a JSON tenants file (the
// TOLLGATE_TENANTS_FILE format, see [LoadFileTenants]). Each tenant spends
// its own rule; a request without a known key is [domain.Unknown] with the
// default rule. [FileTenants.Reload] swaps in a new table atomically, so a
// request sees either the old table or the new one, never a mix.
//
// The key is looked up from X-API-Key, then from Authorization: Bearer:
// the first known key names the tenant.
// Any tenant header a client sends is ignored.
//
// FileTenants is safe for concurrent use by multiple goroutines; lookups
// take no lock.
type FileTenants struct {
	path     string
	fallback domain.Rule // rule of tenants without their own, and of unknown
	table    atomic.Pointer[tenantTable]
	reloadMu sync.Mutex // serializes Reload, so the last file read is the one kept
}

var _ TenantResolver = (*FileTenants)(nil)

// tenantTable is one immutable generation of the tenants file.
//
// It is keyed by the SHA-256 of each API key, and a request is looked up by
// the SHA-256 of the key it presents. A plain map[string]Tenant would
// compare the presented key with stored keys byte by byte, and how long a
// lookup takes would tell an attacker how many leading bytes they guessed
// right. Hashing first removes that signal: hashing takes time that
// depends on the key's length only, and what the map compares is a digest.
// The timing of that comparison can at most reveal a prefix of the digest
// of some valid key, and finding an input with a chosen digest prefix,
// let alone the key itself, is what SHA-256's preimage resistance rules
// out. The key never appears in memory as a map key, either.
type tenantTable struct {
	byKey   map[[sha256.Size]byte]Tenant
	tenants int
}

// LoadFileTenants reads the tenants file at path and returns a resolver
// over it. fallback is the rule of tenants that set no limit or window of
// their own, and of [domain.Unknown]. The file is a JSON object:
//
//	{"tenants": [
//	  {"id": "acme", "api_keys": ["k1", "k2"], "limit": 1000, "window": "1m"},
//	  {"id": "globex", "api_keys": ["k3"]}
//	]}
//
// The file is rejected, with a *[TenantsFileError] that names the problem
// and never an API key, when it does not parse (the error gives the
// line:column), has an unknown field or trailing data, lists no tenants,
// repeats a member name in an object or spells a field in another case
// ("ID"), or a tenant has an invalid id (see [domain.ParseTenantID]), the reserved
// id "unknown", an id or API key already used, no API key, an empty key or
// one with bytes outside printable ASCII or spaces, a limit below 1, or a
// window that is not a Go duration of at least 1ms.
//
// "unknown" is reserved because it is the tenant of all unresolved
// traffic: a tenant by that name would share its budget with every
// anonymous client.
func LoadFileTenants(path string, fallback domain.Rule) (*FileTenants, error) {
	f := &FileTenants{path: path, fallback: fallback}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload reads the tenants file again. When it is valid, its table
// replaces the current one atomically; when not, the error says why (as
// [LoadFileTenants]) and the current table stays in use.
func (f *FileTenants) Reload() error {
	f.reloadMu.Lock()
	defer f.reloadMu.Unlock()
	t, err := readTenantsFile(f.path, f.fallback)
	if err != nil {
		return err
	}
	f.table.Store(t)
	return nil
}

// Len returns the number of tenants in the current table.
func (f *FileTenants) Len() int { return f.table.Load().tenants }

// Path returns the tenants file's path.
func (f *FileTenants) Path() string { return f.path }

// ResolveTenant implements [TenantResolver]: the tenant whose API key r
// presents, or [domain.Unknown] with the fallback rule when r presents no
// key or one that is not in the table.
func (f *FileTenants) ResolveTenant(r *http.Request) Tenant {
	table := f.table.Load()
	if t, ok := table.lookup(r.Header.Get(apiKeyHeader)); ok {
		return t
	}
	if t, ok := table.lookup(bearerToken(r.Header)); ok {
		return t
	}
	return Tenant{ID: domain.Unknown, Rule: f.fallback}
}

// lookup returns the tenant whose API key is key.
func (t *tenantTable) lookup(key string) (Tenant, bool) {
	if key == "" {
		return Tenant{}, false
	}
	var buf [64]byte // on the stack: keys up to 64 bytes hash without allocating
	tenant, ok := t.byKey[sha256.Sum256(append(buf[:0], key...))]
	return tenant, ok
}

// bearerToken returns the token of h's Authorization header when its
// scheme is Bearer (in any case), else "".
func bearerToken(h http.Header) string {
	scheme, token, ok := strings.Cut(h.Get(HeaderAuthorization), " ")
	if token = strings.TrimSpace(token); ok && strings.EqualFold(scheme, "Bearer") {
		return token
	}
	return ""
}

// StripCredentials removes the gateway's credentials from h, the headers
// of a request about to go upstream: every X-API-Key, and a Bearer
// Authorization that is one of the file's keys or that stood alone as the
// presented key. The key belongs to the gateway; the upstream has no use
// for it and must not be able to replay it. An Authorization beside an
// X-API-Key that is not a gateway key is the upstream's own credential
// (a user token) and is kept.
func (f *FileTenants) StripCredentials(h http.Header) {
	if token := bearerToken(h); token != "" {
		if _, known := f.table.Load().lookup(token); known || h.Get(apiKeyHeader) == "" {
			h.Del(HeaderAuthorization)
		}
	}
	h.Del(apiKeyHeader)
}

// TenantsFileError is a tenants file that cannot be read, does not parse
// or breaks a rule. Its message is one line that names the file and the
// problem, and never holds an API key.
type TenantsFileError struct {
	Path string
	// Line and Column locate a syntax or type error, 1-based, in bytes; 0
	// when the problem has no single position.
	Line, Column int
	Err          error
}

// Error returns the one-line message: variable, file, position, problem.
func (e *TenantsFileError) Error() string {
	pos := ""
	if e.Line > 0 {
		pos = fmt.Sprintf("%d:%d: ", e.Line, e.Column)
	}
	return fmt.Sprintf("%sTENANTS_FILE %s: %s%v", EnvPrefix, strconv.Quote(e.Path), pos, e.Err)
}

// Unwrap returns the underlying problem.
func (e *TenantsFileError) Unwrap() error { return e.Err }

// tenantsFile is the JSON document of a tenants file.
type tenantsFile struct {
	Tenants []tenantEntry `json:"tenants"`
}

type tenantEntry struct {
	ID      string   `json:"id"`
	APIKeys []string `json:"api_keys"`
	Limit   *int64   `json:"limit"`  // nil: the default limit
	Window  *string  `json:"window"` // nil: the default window
}

// readTenantsFile reads, parses and validates the tenants file at path.
func readTenantsFile(path string, fallback domain.Rule) (*tenantTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		// The *PathError repeats the path; keep only its cause.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("read: %w", pe.Err)
		}
		return nil, &TenantsFileError{Path: path, Err: err}
	}
	doc, off, err := decodeTenants(data)
	if err != nil {
		e := &TenantsFileError{Path: path, Err: err}
		if off >= 0 {
			e.Line, e.Column = position(data, off)
		}
		return nil, e
	}
	t, err := buildTable(doc, fallback)
	if err != nil {
		return nil, &TenantsFileError{Path: path, Err: err}
	}
	return t, nil
}

// decodeTenants parses data strictly: no unknown field, no member repeated
// in an object, no field name in another case ([checkStrictJSON]), nothing
// after the object. On error it also returns the byte offset the error is at, or -1.
func decodeTenants(data []byte) (tenantsFile, int64, error) {
	var doc tenantsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&doc)
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		if dec.More() {
			off := dec.InputOffset()
			off += int64(len(data[off:]) - len(bytes.TrimLeft(data[off:], " \t\r\n")))
			return doc, off + 1, errors.New("unexpected data after the top-level object")
		}
		// encoding/json keeps the last of repeated members and matches
		// names case-insensitively; the file must say what it means.
		if err := checkStrictJSON(data, reflect.TypeFor[tenantsFile]()); err != nil {
			return doc, strictOffset(err), err
		}
		return doc, -1, nil
	case errors.Is(err, io.EOF):
		return doc, -1, errors.New("empty file: want a JSON object with a \"tenants\" array")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return doc, int64(len(data)), errors.New("unexpected end of file")
	case errors.As(err, &syntax):
		return doc, syntax.Offset, err
	case errors.As(err, &typ):
		return doc, typ.Offset, fmt.Errorf("%s: got a JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
	}
	return doc, unknownFieldOffset(data, err), err
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

// buildTable validates doc and indexes it by key digest. It reports every
// problem, joined on one line.
func buildTable(doc tenantsFile, fallback domain.Rule) (*tenantTable, error) {
	type keyAt struct{ tenant, key int }
	var problems []string
	bad := func(i int, id, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("tenants[%d] (id %q): ", i, id)+fmt.Sprintf(format, args...))
	}
	t := &tenantTable{byKey: make(map[[sha256.Size]byte]Tenant), tenants: len(doc.Tenants)}
	ids := make(map[domain.TenantID]int, len(doc.Tenants))
	keys := make(map[[sha256.Size]byte]keyAt)
	for i, e := range doc.Tenants {
		id, err := domain.ParseTenantID(e.ID)
		switch {
		case err != nil:
			bad(i, e.ID, "%v", err)
		case id == domain.Unknown:
			bad(i, e.ID, "id %q is reserved for unresolved traffic", domain.Unknown)
		default:
			if j, dup := ids[id]; dup {
				bad(i, e.ID, "duplicate id, also tenants[%d]", j)
			} else {
				ids[id] = i
			}
		}
		rule, err := entryRule(e, fallback)
		if err != nil {
			bad(i, e.ID, "%v", err)
		}
		if len(e.APIKeys) == 0 {
			bad(i, e.ID, "no api_keys: want at least one")
		}
		for k, key := range e.APIKeys {
			if !validAPIKey(key) {
				bad(i, e.ID, "api_keys[%d]: want 1 or more bytes of printable ASCII without spaces", k)
				continue
			}
			sum := sha256.Sum256([]byte(key))
			if prev, dup := keys[sum]; dup {
				bad(i, e.ID, "api_keys[%d]: duplicate API key, also tenants[%d] api_keys[%d]", k, prev.tenant, prev.key)
				continue
			}
			keys[sum] = keyAt{i, k}
			t.byKey[sum] = Tenant{ID: id, Rule: rule}
		}
	}
	if len(doc.Tenants) == 0 {
		problems = append(problems, `no tenants: want a "tenants" array with at least one tenant`)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return t, nil
}

// entryRule returns e's rule: its own limit and window, each defaulting
// to fallback's.
func entryRule(e tenantEntry, fallback domain.Rule) (domain.Rule, error) {
	rule := fallback
	if e.Limit != nil {
		rule.Limit = *e.Limit
		if rule.Limit < 1 || rule.Limit > domain.MaxLimit {
			return rule, fmt.Errorf("limit %d: want an integer from 1 to %d", rule.Limit, domain.MaxLimit)
		}
	}
	if e.Window != nil {
		w, err := time.ParseDuration(*e.Window)
		if err != nil || w < domain.MinWindow || w > domain.MaxWindow {
			return rule, fmt.Errorf("window %q: want a Go duration from %s to %s, such as \"1m\"", *e.Window, domain.MinWindow, domain.MaxWindow)
		}
		rule.Window = w
	}
	if err := rule.Validate(); err != nil {
		return rule, err
	}
	return rule, nil
}

// validAPIKey reports whether k can be presented in a header as is: not
// empty, printable ASCII, no spaces.
func validAPIKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return false
		}
	}
	return true
}
