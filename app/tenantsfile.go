package app

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/internal/strictjson"
)

// tenantsFile is the JSON document of a tenants file.
type tenantsFile struct {
	Tenants []tenantEntry `json:"tenants"`
}

type tenantEntry struct {
	ID      string   `json:"id"`
	APIKeys []string `json:"api_keys"`
	// APIKeySHA256 are keys given by their SHA-256, in hex: the file
	// need not hold a secret.
	APIKeySHA256 []string        `json:"api_key_sha256"`
	Limit        *int64          `json:"limit"`  // nil: the default limit's
	Window       *string         `json:"window"` // nil: the default limit's
	Limits       []limitOverride `json:"limits"`
}

// limitOverride is a tenant's own rule for a named limit of the policy:
// for a calendar quota, its limit, zone and anchors (the tenant's
// billing date).
type limitOverride struct {
	Name        string  `json:"name"`
	Limit       *int64  `json:"limit"`        // nil: the policy's
	Window      *string `json:"window"`       // nil: the policy's
	Timezone    *string `json:"timezone"`     // a calendar limit's; nil: the policy's
	AnchorDay   *int    `json:"anchor_day"`   // a calendar limit's; nil: the policy's
	AnchorMonth *int    `json:"anchor_month"` // a calendar limit's; nil: the policy's
	Concurrency *int64  `json:"concurrency"`  // a concurrency limit's; nil: the policy's
}

// calendarFields returns o's calendar options.
func (o limitOverride) calendarFields() calendarFields {
	return calendarFields{Timezone: o.Timezone, AnchorDay: o.AnchorDay, AnchorMonth: o.AnchorMonth}
}

// LoadTenantsFile reads the tenants file at path, validated against
// policy, and returns its directory. The file is a JSON object:
//
//	{"tenants": [
//	  {"id": "acme", "api_keys": ["k1", "k2"], "limit": 1000, "window": "1m"},
//	  {"id": "globex", "api_keys": ["k3"], "limits": [{"name": "per-day", "limit": 500000, "window": "24h"}]},
//	  {"id": "initech", "api_keys": ["k4"]},
//	  {"id": "hooli", "api_key_sha256": ["<64 hex digits>"]}
//	]}
//
// api_key_sha256 gives keys by their SHA-256 in hex (either case), so
// that the file need not hold a secret; a tenant may have both lists.
//
// limit and window override the policy's limit named "default" (each
// defaulting to that limit's); limits override other named limits of the
// policy, global or a route's, the same way, a calendar quota's
// limit, timezone, anchor_day and anchor_month (a customer's billing
// date), and a concurrency limit's concurrency:
//
//	{"id": "acme", "api_keys": ["k1"], "limits": [{"name": "monthly", "limit": 5000000, "anchor_day": 17}, {"name": "inflight", "concurrency": 20}]}
//
// The file is rejected, with a *[strictjson.FileError] naming
// TOLLGATE_TENANTS_FILE that names the problem and never an API key, when
// it does not parse (the error gives the line:column), has an unknown
// field or trailing data, lists no tenants, repeats a member name in an
// object or spells a field in another case ("ID"), or a tenant has an
// invalid id (see [domain.ParseTenantID]), the reserved id "unknown", an
// id or API key already used (a key and a digest of it are the same
// key), no API key, an empty key or one with bytes outside printable
// ASCII or spaces, a digest that is not 64 hex digits, a limit below 1, a window that is
// not a Go duration of at least 1ms, an override of a limit the policy
// lacks (limit and window: of "default") or one named twice, an
// override below the cost of a route the limit applies to (no request of
// the tenant on that route could ever be admitted, and its Retry-After
// would never be true), a concurrency outside 1 to 10⁶, or a concurrency
// for a rate limit, or a limit, window or calendar field for a
// concurrency limit.
//
// "unknown" is reserved because it is the tenant of all unresolved
// traffic: a tenant by that name would share its budget with every
// anonymous client.
func LoadTenantsFile(path string, policy *domain.Policy) (*engine.Directory, error) {
	return loadTenantsFile(path, policy, "")
}

// loadTenantsFile is LoadTenantsFile, whose error for an override of a
// limit the policy lacks ends with hint when hint is not empty.
func loadTenantsFile(path string, policy *domain.Policy, hint string) (*engine.Directory, error) {
	var doc tenantsFile
	if err := strictjson.ReadFile(tenantsFileVar, path, &doc, `a "tenants" array`); err != nil {
		return nil, err
	}
	d, err := buildDirectory(doc, policy, hint)
	if err != nil {
		return nil, &strictjson.FileError{Var: tenantsFileVar, Path: path, Err: err}
	}
	return d, nil
}

// buildDirectory validates doc. It reports every problem, joined on one
// line.
func buildDirectory(doc tenantsFile, policy *domain.Policy, hint string) (*engine.Directory, error) {
	var problems []string
	bad := func(i int, id, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("tenants[%d] (id %q): ", i, id)+fmt.Sprintf(format, args...))
	}
	tenants := make([]engine.Tenant, 0, len(doc.Tenants))
	sumLists := make([][][sha256.Size]byte, 0, len(doc.Tenants))
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
		tenant, errs := entryTenant(id, e, policy, hint)
		for _, err := range errs {
			bad(i, e.ID, "%v", err)
		}
		if len(e.APIKeys)+len(e.APIKeySHA256) == 0 {
			bad(i, e.ID, "no api_keys nor api_key_sha256: want at least one key")
		}
		var sums [][sha256.Size]byte
		add := func(sum [sha256.Size]byte, at keyAt) {
			if prev, dup := keys[sum]; dup {
				bad(i, e.ID, "%s: duplicate API key, also tenants[%d] %s", at.name(), prev.tenant, prev.name())
				return
			}
			keys[sum] = at
			sums = append(sums, sum)
		}
		for k, key := range e.APIKeys {
			if !validAPIKey(key) {
				bad(i, e.ID, "api_keys[%d]: want 1 or more bytes of printable ASCII without spaces", k)
				continue
			}
			add(sha256.Sum256([]byte(key)), keyAt{i, k, false})
		}
		for k, digest := range e.APIKeySHA256 {
			var sum [sha256.Size]byte
			if len(digest) != hex.EncodedLen(sha256.Size) {
				bad(i, e.ID, "api_key_sha256[%d]: want the SHA-256 of a key, 64 hex digits", k)
				continue
			}
			if _, err := hex.Decode(sum[:], []byte(digest)); err != nil {
				bad(i, e.ID, "api_key_sha256[%d]: want the SHA-256 of a key, 64 hex digits", k)
				continue
			}
			add(sum, keyAt{i, k, true})
		}
		tenants = append(tenants, tenant)
		sumLists = append(sumLists, sums)
	}
	if len(doc.Tenants) == 0 {
		problems = append(problems, `no tenants: want a "tenants" array with at least one tenant`)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return engine.NewHashedDirectory(tenants, sumLists), nil
}

// keyAt is where a tenants file gives a key: tenants[tenant], and
// api_keys[key] or api_key_sha256[key].
type keyAt struct {
	tenant, key int
	digest      bool
}

// name is where the key is within its tenant: "api_keys[1]".
func (k keyAt) name() string {
	if k.digest {
		return fmt.Sprintf("api_key_sha256[%d]", k.key)
	}
	return fmt.Sprintf("api_keys[%d]", k.key)
}

// entryTenant returns the tenant e describes, with id, under policy: its
// own rules for named limits (limit and window: the limit "default";
// limits: any). It reports every problem; hint ends the one of an
// override of a limit the policy lacks.
func entryTenant(id domain.TenantID, e tenantEntry, policy *domain.Policy, hint string) (engine.Tenant, []error) {
	t := engine.Tenant{ID: id}
	var errs []error
	override := func(name string, rule domain.Rule) {
		if t.Rules == nil {
			t.Rules = make(map[string]domain.Rule, 1+len(e.Limits))
		}
		t.Rules[name] = rule
	}
	if e.Limit != nil || e.Window != nil {
		if def, ok := policy.Limit(domain.DefaultLimit); !ok {
			errs = append(errs, fmt.Errorf("limit and window override the limit %q, which the policy file does not have: name a limit in \"limits\"", domain.DefaultLimit))
		} else if def.Concurrency {
			errs = append(errs, fmt.Errorf("limit and window override the limit %q, a concurrency limit: override its \"concurrency\" in \"limits\"", domain.DefaultLimit))
		} else if def.Calendar != nil && e.Window != nil {
			errs = append(errs, fmt.Errorf("window: the limit %q is a calendar limit: it has a period, not a window", domain.DefaultLimit))
		} else if rule, err := overrideRule(e.Limit, e.Window, def.Rule); err != nil {
			errs = append(errs, err)
		} else if err := policy.CheckOverride(domain.DefaultLimit, rule); err != nil {
			errs = append(errs, err)
		} else {
			override(domain.DefaultLimit, rule)
		}
	}
	for k, o := range e.Limits {
		at := fmt.Sprintf("limits[%d] (name %q): ", k, o.Name)
		l, ok := policy.Limit(o.Name)
		switch _, dup := t.Rules[o.Name]; {
		case !ok:
			errs = append(errs, fmt.Errorf("%sthe policy has no limit of that name%s", at, hint))
			continue
		case dup || (o.Name == domain.DefaultLimit && (e.Limit != nil || e.Window != nil)):
			errs = append(errs, fmt.Errorf("%soverridden twice", at))
			continue
		}
		var (
			rule domain.Rule
			err  error
		)
		cal := o.calendarFields()
		switch {
		case l.Concurrency && (o.Limit != nil || o.Window != nil || cal.options()):
			err = errors.New(`a concurrency limit caps the requests in flight: override its "concurrency", not a limit, window or calendar`)
		case l.Concurrency:
			rule = l.Rule
			if o.Concurrency != nil {
				rule, err = domain.ConcurrencyRule(*o.Concurrency)
			}
		case o.Concurrency != nil:
			err = errors.New(`"concurrency" overrides a concurrency limit's; this limit counts requests per window`)
		case l.Calendar == nil && cal.options():
			err = errors.New(`"timezone", "anchor_day" and "anchor_month" override a calendar limit's; this limit has a window`)
		case l.Calendar != nil && o.Window != nil:
			err = errors.New(`a calendar limit has a period, not a window: override its "limit", "timezone", "anchor_day" or "anchor_month"`)
		case l.Calendar != nil:
			rule, err = overrideLimit(o.Limit, l.Rule)
			if err == nil && cal.options() {
				var c *domain.Calendar
				if c, err = cal.calendar(l.Calendar); err == nil {
					if t.Calendars == nil {
						t.Calendars = make(map[string]*domain.Calendar, 1)
					}
					t.Calendars[o.Name] = c
				}
			}
		default:
			rule, err = overrideRule(o.Limit, o.Window, l.Rule)
		}
		if err == nil {
			err = policy.CheckOverride(o.Name, rule)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s%w", at, err))
			continue
		}
		override(o.Name, rule)
	}
	return t, errs
}

// overrideLimit returns fallback with limit, where given, replacing its
// own, and its window kept (a calendar limit's is its unit's).
func overrideLimit(limit *int64, fallback domain.Rule) (domain.Rule, error) {
	if limit != nil {
		if *limit < 1 || *limit > domain.MaxLimit {
			return fallback, fmt.Errorf("limit %d: want an integer from 1 to %d", *limit, domain.MaxLimit)
		}
		fallback.Limit = *limit
	}
	return fallback, nil
}

// overrideRule returns fallback with limit and window, where given,
// replacing its own.
func overrideRule(limit *int64, window *string, fallback domain.Rule) (domain.Rule, error) {
	rule, err := overrideLimit(limit, fallback)
	if err != nil {
		return rule, err
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
