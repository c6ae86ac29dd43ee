package rls_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// t0 is 10 s into a minute (and an hour, a day): a minute's window ends
// 50 s on, a second's 1 s on.
var t0 = time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)

// basicYAML is envoyproxy/ratelimit's everyday shapes.
const basicYAML = `
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key2
    value: value2
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: key2
    value: value3
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: key4
    rate_limit: {name: key4_rate_limit, unit: day, requests_per_unit: 1}
  - key: key6
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plan
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: burst
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: soft
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: week
    rate_limit: {unit: week, requests_per_unit: 2}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// replacesYAML is a chain of replaces, and an unlimited rule that
// replaces.
const replacesYAML = `
domain: replaces
descriptors:
  - key: a
    rate_limit: {name: a, unit: minute, requests_per_unit: 1, replaces: [{name: b}]}
  - key: b
    rate_limit: {name: b, unit: minute, requests_per_unit: 5, replaces: [{name: c}]}
  - key: c
    rate_limit: {name: c, unit: minute, requests_per_unit: 7}
  - key: u
    rate_limit: {unlimited: true, name: u, replaces: [{name: c}]}
`

// face is a face on the memory store, its clock and its store calls.
type face struct {
	*rls.Server
	clock *portstest.FakeClock
	calls *counting
	store *memory.Limiter
}

// faceOptions change a test face.
type faceOptions struct {
	algorithm string
	opts      rls.Options
	// countDenied builds the store counting every hit, denied ones too
	// (TOLLGATE_RLS_COUNT_DENIED); else every hit of an admitted request.
	countDenied bool
	layers      []ports.Layer        // between the engine and the store's call count
	store       ports.Limiter        // nil: the memory store
	clock       *portstest.FakeClock // nil: a new one at t0
	maxKeys     int                  // the memory store's bound; 0: its default
}

// newFace returns a face with yaml's configuration on a fixed-window
// memory store at t0.
func newFace(t testing.TB, yaml string) *face { return newFaceWith(t, yaml, faceOptions{}) }

func newFaceWith(t testing.TB, yaml string, fo faceOptions) *face {
	t.Helper()
	if fo.algorithm == "" {
		fo.algorithm = domain.AlgorithmFixedWindow
	}
	clk := fo.clock
	if clk == nil {
		clk = portstest.NewFakeClock(t0)
	}
	layout := keys.Layout{Prefix: "rl:", Algorithm: fo.algorithm}
	store, err := memory.New(fo.algorithm, memory.Options{Now: clk.Now, SweepInterval: -1, MaxKeys: fo.maxKeys, Family: layout.Family, View: rlsView(fo.countDenied)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	calls := &counting{next: store}
	if fo.store != nil {
		calls.next = fo.store
	}
	eng := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 1, Window: time.Minute}, false)},
		engine.Options{Limiter: ports.Chain(calls, fo.layers...), Keys: layout, Algorithm: fo.algorithm})
	return &face{Server: rls.New(parse(t, yaml), withEngine(fo.opts, eng)), clock: clk, calls: calls, store: store}
}

// rlsView is how the gateway's store decides the rate limit service's
// requests: every hit of an admitted request counted (every hit, denied
// ones too, with countDenied), in windows aligned to the epoch.
func rlsView(countDenied bool) memory.View {
	v := memory.View{Counting: domain.CountHits, Windows: domain.WindowsEpoch}
	if countDenied {
		v.Counting = domain.CountEvery
	}
	return v
}

// withEngine returns opts deciding with eng.
func withEngine(opts rls.Options, eng *engine.Engine) rls.Options {
	opts.Engine = eng
	return opts
}

// parse loads the YAML files given.
func parse(t testing.TB, yamls ...string) *rlsconf.Config {
	t.Helper()
	var files []rlsconf.File
	for i, y := range yamls {
		files = append(files, rlsconf.File{Name: "f" + string(rune('0'+i)) + ".yaml", Data: []byte(y)})
	}
	c, err := rlsconf.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counting is a limiter that counts the calls that reach it.
type counting struct {
	next ports.Limiter
	mu   sync.Mutex // guards n, last
	n    int
	last domain.Request
}

func (c *counting) Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	c.mu.Lock()
	c.n++
	c.last = req
	c.mu.Unlock()
	return c.next.Allow(ctx, req, dst)
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// desc is a descriptor of "key=value" entries.
func desc(entries ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range entries {
		k, v, _ := strings.Cut(e, "=")
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// withHits sets d's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// withLimit sets d's limit override.
func withLimit(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

// rq is a request of domain with request-level hits (0: unset).
func rq(domain string, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: descs}
}

// ask sends req and fails t on an error.
func (f *face) ask(t *testing.T, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := f.ShouldRateLimit(t.Context(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		t.Fatalf("ShouldRateLimit(%v): %d statuses for %d descriptors", req, len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

// st is a status as tests spell it: code, current limit (rpu, unit,
// name; nil: none), remaining, and duration in seconds (-1: none).
type st struct {
	code      pb.RateLimitResponse_Code
	limit     *pb.RateLimitResponse_RateLimit
	remaining uint32
	reset     int64
}

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// lim is a current_limit.
func lim(rpu uint32, unit pb.RateLimitResponse_RateLimit_Unit, name string) *pb.RateLimitResponse_RateLimit {
	return &pb.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit, Name: name}
}

var (
	none   = st{code: ok, reset: -1} // unmatched: OK, nothing else
	minute = pb.RateLimitResponse_RateLimit_MINUTE
	second = pb.RateLimitResponse_RateLimit_SECOND
	hourU  = pb.RateLimitResponse_RateLimit_HOUR
	dayU   = pb.RateLimitResponse_RateLimit_DAY
)

// check fails t unless resp's overall code is overall and its statuses
// are want.
func check(t *testing.T, step string, resp *pb.RateLimitResponse, overall pb.RateLimitResponse_Code, want ...st) {
	t.Helper()
	if resp.OverallCode != overall {
		t.Errorf("%s: overall_code %v, want %v", step, resp.OverallCode, overall)
	}
	if len(resp.Statuses) != len(want) {
		t.Fatalf("%s: %d statuses, want %d", step, len(resp.Statuses), len(want))
	}
	for i, w := range want {
		got := resp.Statuses[i]
		if got.Code != w.code {
			t.Errorf("%s: status %d code %v, want %v", step, i, got.Code, w.code)
		}
		switch cl := got.CurrentLimit; {
		case (cl == nil) != (w.limit == nil):
			t.Errorf("%s: status %d current_limit %v, want %v", step, i, cl, w.limit)
		case cl != nil && (cl.RequestsPerUnit != w.limit.RequestsPerUnit || cl.Unit != w.limit.Unit || cl.Name != w.limit.Name):
			t.Errorf("%s: status %d current_limit %v, want %v", step, i, cl, w.limit)
		}
		if got.LimitRemaining != w.remaining {
			t.Errorf("%s: status %d limit_remaining %d, want %d", step, i, got.LimitRemaining, w.remaining)
		}
		switch d := got.DurationUntilReset; {
		case w.reset < 0 && d != nil:
			t.Errorf("%s: status %d duration_until_reset %v, want none", step, i, d)
		case w.reset >= 0 && (d == nil || d.Seconds != w.reset || d.Nanos != 0):
			t.Errorf("%s: status %d duration_until_reset %v, want %ds", step, i, d, w.reset)
		}
	}
}
