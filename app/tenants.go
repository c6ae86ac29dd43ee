package app

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
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
// TOLLGATE_TENANTS_FILE format, see [LoadFileTenants]), each with its
// own rules for the policy's limits; a request without a known key is
// [domain.Unknown] with the policy's rules. The tenants are validated
// against a policy, and carry it ([Tenant.Policy]): [FileTenants.Reload]
// re-reads the policy and the tenants file and swaps in both at once, so
// a request sees the old pair or the new one, never a mix.
//
// The key is looked up from X-API-Key, then from Authorization: Bearer:
// the first known key names the tenant.
// Any tenant header a client sends is ignored.
//
// FileTenants is safe for concurrent use by multiple goroutines; lookups
// take no lock.
type FileTenants struct {
	path       string
	loadPolicy func() (*domain.Policy, error)
	table      atomic.Pointer[tenantTable]
	reloadMu   sync.Mutex // serializes Reload, so the last files read are the ones kept
}

var _ TenantResolver = (*FileTenants)(nil)

// tenantTable is one immutable generation of the tenants file, with the
// policy it was validated against.
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
	policy  *domain.Policy
	unknown Tenant // of requests without a known key
}

// LoadFileTenants reads the tenants file at path and returns a resolver
// over it, with the policy of a gateway without a policy file: one limit,
// "default", whose rule is fallback (TOLLGATE_LIMIT per TOLLGATE_WINDOW).
// See [NewFileTenants].
func LoadFileTenants(path string, fallback domain.Rule) (*FileTenants, error) {
	p := domain.DefaultPolicy(fallback, false)
	return NewFileTenants(path, func() (*domain.Policy, error) { return p, nil })
}

// NewFileTenants reads the policy with loadPolicy and the tenants file at
// path, validated against it, and returns a resolver over both. The file
// is a JSON object:
//
//	{"tenants": [
//	  {"id": "acme", "api_keys": ["k1", "k2"], "limit": 1000, "window": "1m"},
//	  {"id": "globex", "api_keys": ["k3"], "limits": [{"name": "per-day", "limit": 500000, "window": "24h"}]},
//	  {"id": "initech", "api_keys": ["k4"]}
//	]}
//
// limit and window override the policy's limit named "default" (each
// defaulting to that limit's); limits override other named limits of the
// policy, global or a route's, the same way.
//
// The file is rejected, with a *[TenantsFileError] that names the problem
// and never an API key, when it does not parse (the error gives the
// line:column), has an unknown field or trailing data, lists no tenants,
// repeats a member name in an object or spells a field in another case
// ("ID"), or a tenant has an invalid id (see [domain.ParseTenantID]), the reserved
// id "unknown", an id or API key already used, no API key, an empty key or
// one with bytes outside printable ASCII or spaces, a limit below 1, a
// window that is not a Go duration of at least 1ms, an override of a
// limit the policy lacks (limit and window: of "default") or one named
// twice. An error of loadPolicy is returned as it is.
//
// "unknown" is reserved because it is the tenant of all unresolved
// traffic: a tenant by that name would share its budget with every
// anonymous client.
func NewFileTenants(path string, loadPolicy func() (*domain.Policy, error)) (*FileTenants, error) {
	f := &FileTenants{path: path, loadPolicy: loadPolicy}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload reads the policy and the tenants file again. When both are
// valid, they replace the current pair in one atomic step; when either
// is not, the error says why (as [NewFileTenants]) and the current pair
// stays in use.
func (f *FileTenants) Reload() error {
	f.reloadMu.Lock()
	defer f.reloadMu.Unlock()
	p, err := f.loadPolicy()
	if err != nil {
		return err
	}
	t, err := readTenantsFile(f.path, p)
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

// Policy returns the policy the current tenants were validated against.
func (f *FileTenants) Policy() *domain.Policy { return f.table.Load().policy }

// ResolveTenant implements [TenantResolver]: the tenant whose API key r
// presents, or [domain.Unknown] with the policy's rules when r presents
// no key or one that is not in the table.
func (f *FileTenants) ResolveTenant(r *http.Request) Tenant {
	table := f.table.Load()
	if t, ok := table.lookup(r.Header.Get(apiKeyHeader)); ok {
		return t
	}
	if t, ok := table.lookup(bearerToken(r.Header)); ok {
		return t
	}
	return table.unknown
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
// or breaks a rule: a [FileError] naming TOLLGATE_TENANTS_FILE.
type TenantsFileError = FileError

// tenantsFile is the JSON document of a tenants file.
type tenantsFile struct {
	Tenants []tenantEntry `json:"tenants"`
}

type tenantEntry struct {
	ID      string          `json:"id"`
	APIKeys []string        `json:"api_keys"`
	Limit   *int64          `json:"limit"`  // nil: the default limit's
	Window  *string         `json:"window"` // nil: the default limit's
	Limits  []limitOverride `json:"limits"`
}

// limitOverride is a tenant's own rule for a named limit of the policy.
type limitOverride struct {
	Name   string  `json:"name"`
	Limit  *int64  `json:"limit"`  // nil: the policy's
	Window *string `json:"window"` // nil: the policy's
}

// readTenantsFile reads, parses and validates the tenants file at path
// against policy.
func readTenantsFile(path string, policy *domain.Policy) (*tenantTable, error) {
	var doc tenantsFile
	if err := readStrictJSON("TENANTS_FILE", path, &doc, `a "tenants" array`); err != nil {
		return nil, err
	}
	t, err := buildTable(doc, policy)
	if err != nil {
		return nil, &FileError{Var: "TENANTS_FILE", Path: path, Err: err}
	}
	t.policy = policy
	return t, nil
}

// buildTable validates doc and indexes it by key digest. It reports every
// problem, joined on one line.
func buildTable(doc tenantsFile, policy *domain.Policy) (*tenantTable, error) {
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
		tenant, errs := entryTenant(id, e, policy)
		for _, err := range errs {
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
			t.byKey[sum] = tenant
		}
	}
	if len(doc.Tenants) == 0 {
		problems = append(problems, `no tenants: want a "tenants" array with at least one tenant`)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	t.unknown, _ = entryTenant(domain.Unknown, tenantEntry{}, policy)
	return t, nil
}

// entryTenant returns the tenant e describes, with id, under policy:
// its rule for the limit "default" (limit and window), its own rules for
// other named limits (limits), and the policy. It reports every problem.
func entryTenant(id domain.TenantID, e tenantEntry, policy *domain.Policy) (Tenant, []error) {
	t := Tenant{ID: id, Policy: policy}
	var errs []error
	def, hasDefault := policy.Limit(domain.DefaultLimit)
	if hasDefault {
		t.Rule = def.Rule
	}
	if e.Limit != nil || e.Window != nil {
		if !hasDefault {
			errs = append(errs, fmt.Errorf("limit and window override the limit %q, which the policy file does not have: name a limit in \"limits\"", domain.DefaultLimit))
		} else if rule, err := overrideRule(e.Limit, e.Window, def.Rule); err != nil {
			errs = append(errs, err)
		} else {
			t.Rule = rule
		}
	}
	for k, o := range e.Limits {
		at := fmt.Sprintf("limits[%d] (name %q): ", k, o.Name)
		l, ok := policy.Limit(o.Name)
		switch _, dup := t.Limits[o.Name]; {
		case !ok:
			errs = append(errs, fmt.Errorf("%sthe policy has no limit of that name", at))
			continue
		case dup || (o.Name == domain.DefaultLimit && (e.Limit != nil || e.Window != nil)):
			errs = append(errs, fmt.Errorf("%soverridden twice", at))
			continue
		}
		rule, err := overrideRule(o.Limit, o.Window, l.Rule)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s%w", at, err))
			continue
		}
		if t.Limits == nil {
			t.Limits = make(map[string]domain.Rule, len(e.Limits))
		}
		t.Limits[o.Name] = rule
		if o.Name == domain.DefaultLimit {
			t.Rule = rule
		}
	}
	return t, errs
}

// overrideRule returns fallback with limit and window, where given,
// replacing its own.
func overrideRule(limit *int64, window *string, fallback domain.Rule) (domain.Rule, error) {
	rule := fallback
	if limit != nil {
		rule.Limit = *limit
		if rule.Limit < 1 || rule.Limit > domain.MaxLimit {
			return rule, fmt.Errorf("limit %d: want an integer from 1 to %d", rule.Limit, domain.MaxLimit)
		}
	}
	if window != nil {
		w, err := time.ParseDuration(*window)
		if err != nil || w < domain.MinWindow || w > domain.MaxWindow {
			return rule, fmt.Errorf("window %q: want a Go duration from %s to %s, such as \"1m\"", *window, domain.MinWindow, domain.MaxWindow)
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
