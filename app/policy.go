package app

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// policyFile is the JSON document of a policy file (TOLLGATE_POLICY_FILE).
type policyFile struct {
	Limits []policyLimitEntry `json:"limits"`
	Routes []policyRouteEntry `json:"routes"`
}

type policyLimitEntry struct {
	Name   string  `json:"name"`
	Limit  *int64  `json:"limit"`  // required
	Window *string `json:"window"` // required
	Shadow bool    `json:"shadow"`
}

type policyRouteEntry struct {
	Name   string             `json:"name"`
	Method string             `json:"method"` // empty: any
	Path   string             `json:"path"`
	Cost   *int64             `json:"cost"` // nil: 1
	Limits []policyLimitEntry `json:"limits"`
}

// LoadPolicyFile reads the policy file at path: named global limits, and
// routes with a cost and limits of their own. With shadowAll
// (TOLLGATE_SHADOW) every limit is in shadow mode. The file is a JSON
// object:
//
//	{"limits": [
//	   {"name": "per-second", "limit": 20, "window": "1s"},
//	   {"name": "per-day", "limit": 100000, "window": "24h", "shadow": true}],
//	 "routes": [
//	   {"name": "search", "method": "POST", "path": "/v1/search", "cost": 5},
//	   {"name": "export", "path": "/v1/export", "limits": [{"name": "exports", "limit": 10, "window": "1h"}]},
//	   {"name": "status", "path": "/status", "cost": 0}]}
//
// It is rejected, with a *[FileError] naming TOLLGATE_POLICY_FILE and
// every problem on one line, when it does not parse (with the
// line:column), has an unknown field or trailing data, repeats a member
// name in an object or spells a field in another case, has neither
// limits nor routes, a limit without a limit or window, a window that is
// not a Go duration, or anything [domain.NewPolicy] refuses: a bad or
// duplicate name, a bad rule, a bad path or method, a duplicate (method,
// path), a cost outside 0 to 10⁶.
func LoadPolicyFile(path string, shadowAll bool) (*domain.Policy, error) {
	var doc policyFile
	if err := readStrictJSON("POLICY_FILE", path, &doc, `"limits" and "routes" arrays`); err != nil {
		return nil, err
	}
	p, err := buildPolicy(doc, shadowAll)
	if err != nil {
		return nil, &FileError{Var: "POLICY_FILE", Path: path, Err: err}
	}
	return p, nil
}

// buildPolicy validates doc into a policy, reporting every problem on
// one line.
func buildPolicy(doc policyFile, shadowAll bool) (*domain.Policy, error) {
	var problems []string
	limits := func(at string, entries []policyLimitEntry) []domain.PolicyLimit {
		out := make([]domain.PolicyLimit, 0, len(entries))
		for i, e := range entries {
			l, err := e.limit(shadowAll)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s[%d] (name %q): %v", at, i, e.Name, err))
			}
			out = append(out, l)
		}
		return out
	}
	global := limits("limits", doc.Limits)
	routes := make([]domain.Route, 0, len(doc.Routes))
	for i, e := range doc.Routes {
		r := domain.Route{Name: e.Name, Method: e.Method, Path: e.Path, Cost: 1,
			Limits: limits(fmt.Sprintf("routes[%d].limits", i), e.Limits)}
		if e.Cost != nil {
			r.Cost = *e.Cost
		}
		routes = append(routes, r)
	}
	if len(doc.Limits) == 0 && len(doc.Routes) == 0 {
		problems = append(problems, `no limits and no routes: want at least one of them`)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	p, err := domain.NewPolicy(global, routes)
	if err != nil {
		// One line, and the file error says what is invalid already.
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		return nil, errors.New(strings.ReplaceAll(msg, domain.ErrInvalidPolicy.Error()+": ", ""))
	}
	return p, nil
}

// limit returns e as a limit, shadow when e or shadowAll says so.
func (e policyLimitEntry) limit(shadowAll bool) (domain.PolicyLimit, error) {
	l := domain.PolicyLimit{Name: e.Name, Shadow: e.Shadow || shadowAll}
	switch {
	case e.Limit == nil:
		return l, errors.New(`no "limit": want an integer from 1 to 1000000000`)
	case e.Window == nil:
		return l, errors.New(`no "window": want a Go duration, such as "1m"`)
	}
	w, err := time.ParseDuration(*e.Window)
	if err != nil {
		return l, fmt.Errorf("window %q: want a Go duration from %s to %s, such as \"1m\"", *e.Window, domain.MinWindow, domain.MaxWindow)
	}
	l.Rule = domain.Rule{Limit: *e.Limit, Window: w}
	return l, nil // NewPolicy validates the rule
}

// policySource is the gateway's current policy: the policy file's,
// reloaded on SIGHUP, or without a file the one limit "default".
//
// A policySource is safe for concurrent use by multiple goroutines;
// Policy takes no lock.
type policySource struct {
	path     string // empty: no policy file
	shadow   bool   // TOLLGATE_SHADOW
	fallback *domain.Policy
	cur      atomic.Pointer[domain.Policy]
	reloadMu sync.Mutex // serializes Reload
}

// newPolicySource loads cfg's policy: the policy file, or without one
// the limit "default" of TOLLGATE_LIMIT per TOLLGATE_WINDOW.
func newPolicySource(cfg Config) (*policySource, error) {
	s := &policySource{path: cfg.PolicyFile, shadow: cfg.Shadow}
	if s.path == "" {
		s.fallback = domain.DefaultPolicy(cfg.Rule(), cfg.Shadow)
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Read reads the policy file, or returns the fallback policy, without
// making it current.
func (s *policySource) Read() (*domain.Policy, error) {
	if s.path == "" {
		return s.fallback, nil
	}
	return LoadPolicyFile(s.path, s.shadow)
}

// Reload reads the policy file again and, when it is valid, makes it
// current; when not, the current policy stays.
func (s *policySource) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	p, err := s.Read()
	if err != nil {
		return err
	}
	s.cur.Store(p)
	return nil
}

// Policy returns the current policy.
func (s *policySource) Policy() *domain.Policy { return s.cur.Load() }

// outcomeUnmetered is the access log's outcome of a request on a route
// that is not metered (cost 0, or no limits).
const outcomeUnmetered = "unmetered"

// resolve is the policy-resolution step: it matches r's route in t's
// policy and builds the request to decide, one limit per limit of the
// route (the global ones in order, then the route's own), each with t's
// rule for it and its key. metered is false for a route of cost 0 or
// without limits: such a request is never put to the limiter.
func (m *meter) resolve(r *http.Request, t Tenant) (route *domain.Route, req domain.Request, metered bool) {
	p := t.Policy
	if p == nil {
		p = m.implicit // its "default" limit takes t.Rule
	}
	route = p.Match(r.Method, r.URL.EscapedPath())
	applied := route.Applied()
	if route.Cost == 0 || len(applied) == 0 {
		return route, domain.Request{}, false
	}
	req = domain.Request{Tenant: t.ID, Route: route.Name, Cost: route.Cost}
	req.Limits, req.Decisions = newRequestBuffers(len(applied))
	for i, l := range applied {
		keyRoute := ""
		if route.Own(i) {
			keyRoute = route.Name
		}
		req.Limits[i] = domain.Limit{
			Name:   l.Name,
			Rule:   t.rule(l),
			Key:    domain.Key(m.opts.KeyPrefix, t.ID, m.opts.Algorithm, keyRoute, l.Name),
			Shadow: l.Shadow,
		}
	}
	return route, req, true
}
