package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

const goodFile = `
scenarios:
  - name: one
    count_denied: true
    steps:
      - domain: d
        hits_addend: 3
        repeat: 2
        error_text: true
        descriptors:
          - entries: [a=1, "b=", c=x=y]
            limit: {requests_per_unit: 7, unit: hour}
            hits_addend: 0
          - {entries: [z=9]}
        expect: {overall: OVER_LIMIT, codes: [OK, OVER_LIMIT], remaining: [1, 0]}
`

func TestParseFileBuildsRequests(t *testing.T) {
	t.Parallel()
	f, err := ParseFile([]byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Scenarios[0]
	if !s.CountDenied || s.Selected("default") || !s.Selected("count-denied") || !s.Selected("all") {
		t.Errorf("count_denied scenario selection wrong: %+v", s)
	}
	st := s.Steps[0]
	if got, want := st.Times(), 2; got != want || !st.ErrorText {
		t.Errorf("Times() = %d, want %d; ErrorText %v", got, want, st.ErrorText)
	}
	req, err := st.Request()
	if err != nil {
		t.Fatal(err)
	}
	if req.GetDomain() != "d" || req.GetHitsAddend() != 3 || len(req.GetDescriptors()) != 2 {
		t.Fatalf("request = %v", req)
	}
	d0, d1 := req.GetDescriptors()[0], req.GetDescriptors()[1]
	var got []string
	for _, e := range d0.GetEntries() {
		got = append(got, e.GetKey()+"|"+e.GetValue())
	}
	if want := []string{"a|1", "b|", "c|x=y"}; !slices.Equal(got, want) {
		t.Errorf("entries = %q, want %q", got, want)
	}
	if l := d0.GetLimit(); l.GetRequestsPerUnit() != 7 || l.GetUnit() != typev3.RateLimitUnit_HOUR {
		t.Errorf("limit = %v", l)
	}
	if h := d0.GetHitsAddend(); h == nil || h.GetValue() != 0 {
		t.Errorf("hits_addend 0 must be sent as a set 0, got %v", h)
	}
	if d1.GetHitsAddend() != nil || d1.GetLimit() != nil {
		t.Errorf("unset fields sent: %v", d1)
	}
	if (Step{}).Times() != 1 {
		t.Errorf("a step without repeat runs once")
	}
}

func TestParseFileRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "scenarios: [{name: x, steps: [{domain: d, hits: 1}]}]", "hits"},
		{"entry without =", "scenarios: [{name: x, steps: [{domain: d, descriptors: [{entries: [a]}]}]}]", `"a" is not key=value`},
		{"unknown unit", "scenarios: [{name: x, steps: [{descriptors: [{entries: [a=1], limit: {unit: fortnight}}]}]}]", "fortnight"},
		{"week override", "scenarios: [{name: x, steps: [{descriptors: [{entries: [a=1], limit: {unit: week}}]}]}]", "week"},
		{"unknown override unit", "scenarios: [{name: x, steps: [{descriptors: [{entries: [a=1], limit: {unit: unknown}}]}]}]", "unknown"},
		{"no unit", "scenarios: [{name: x, steps: [{descriptors: [{entries: [a=1], limit: {requests_per_unit: 1}}]}]}]", `unit ""`},
		{"bad code", "scenarios: [{name: x, steps: [{domain: d, expect: {overall: DENIED}}]}]", "DENIED"},
		{"bad status code", "scenarios: [{name: x, steps: [{domain: d, expect: {codes: [OK, NO]}}]}]", `"NO"`},
		{"no name", "scenarios: [{steps: [{domain: d}]}]", "no name"},
		{"twice", "scenarios: [{name: x, steps: [{domain: d}]}, {name: x, steps: [{domain: d}]}]", "twice"},
		{"no steps", "scenarios: [{name: x}]", "no steps"},
		{"nothing", "scenarios: []", "no scenarios"},
		{"not yaml", "scenarios: [", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseFile([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFile = %v, want an error mentioning %s", err, tc.want)
			}
		})
	}
}

func TestParseFileJSON(t *testing.T) {
	t.Parallel()
	f, err := ParseFile([]byte(`{"scenarios": [{"name": "j", "steps": [{"domain": "d", "descriptors": [{"entries": ["k=v"], "hits_addend": 5}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := f.Scenarios[0].Steps[0].Descriptors[0].HitsAddend; h == nil || *h != 5 {
		t.Errorf("hits_addend = %v", h)
	}
}

// dstatus builds one descriptor status; reset < 0 leaves duration_until_reset unset.
func dstatus(code rlsv3.RateLimitResponse_Code, limit *rlsv3.RateLimitResponse_RateLimit, remaining uint32, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	s := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: limit, LimitRemaining: remaining}
	if reset >= 0 {
		s.DurationUntilReset = durationpb.New(time.Duration(reset) * time.Second)
	}
	return s
}

func answer(overall rlsv3.RateLimitResponse_Code, st ...*rlsv3.RateLimitResponse_DescriptorStatus) Answer {
	return Answer{Resp: &rlsv3.RateLimitResponse{OverallCode: overall, Statuses: st}}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
	)
	lim := func(rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, name string) *rlsv3.RateLimitResponse_RateLimit {
		return &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit, Name: name}
	}
	minute := rlsv3.RateLimitResponse_RateLimit_MINUTE
	base := answer(ok, dstatus(ok, lim(10, minute, "n"), 3, 30), dstatus(ok, nil, 0, -1))
	errA := Answer{Err: status.Error(codes.Unknown, "rate limit domain must not be empty")}
	errB := Answer{Err: status.Error(codes.InvalidArgument, "empty domain")}
	for _, tc := range []struct {
		name      string
		a, b      Answer
		errorText bool
		want      []string
	}{
		{"same", base, base, false, nil},
		{"reset within a second", base, answer(ok, dstatus(ok, lim(10, minute, "n"), 3, 29), dstatus(ok, nil, 0, -1)), false, nil},
		{"reset two seconds off", base, answer(ok, dstatus(ok, lim(10, minute, "n"), 3, 32), dstatus(ok, nil, 0, -1)), false,
			[]string{"statuses[0].duration_until_reset: a=30s b=32s"}},
		{"reset missing", base, answer(ok, dstatus(ok, lim(10, minute, "n"), 3, -1), dstatus(ok, nil, 0, -1)), false,
			[]string{"statuses[0].duration_until_reset: a=30s b=0s"}},
		{"overall", base, answer(over, dstatus(ok, lim(10, minute, "n"), 3, 30), dstatus(ok, nil, 0, -1)), false,
			[]string{"overall_code: a=OK b=OVER_LIMIT"}},
		{"code and remaining", base, answer(ok, dstatus(over, lim(10, minute, "n"), 0, 30), dstatus(ok, nil, 0, -1)), false,
			[]string{"statuses[0].code: a=OK b=OVER_LIMIT", "statuses[0].limit_remaining: a=3 b=0"}},
		{"limit fields", base, answer(ok, dstatus(ok, lim(11, rlsv3.RateLimitResponse_RateLimit_HOUR, ""), 3, 30), dstatus(ok, nil, 0, -1)), false,
			[]string{"statuses[0].current_limit.requests_per_unit: a=10 b=11", "statuses[0].current_limit.unit: a=MINUTE b=HOUR",
				`statuses[0].current_limit.name: a="n" b=""`}},
		{"limit where none", base, answer(ok, dstatus(ok, lim(10, minute, "n"), 3, 30), dstatus(ok, lim(1, minute, ""), 0, -1)), false,
			[]string{`statuses[1].current_limit: a=nil b={1/MINUTE ""}`}},
		{"statuses", base, answer(ok, dstatus(ok, lim(10, minute, "n"), 3, 30)), false, []string{"len(statuses): a=2 b=1"}},
		{"error against answer", errA, base, false, []string{`error: a=Unknown "rate limit domain must not be empty" b=no error`}},
		{"both errors", errA, errB, false, nil},
		{"both errors, text compared", errA, errB, true,
			[]string{`error text: a="rate limit domain must not be empty" b="empty domain"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Diff(tc.a, tc.b, tc.errorText); !slices.Equal(got, tc.want) {
				t.Errorf("Diff =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestUnmet(t *testing.T) {
	t.Parallel()
	a := answer(rlsv3.RateLimitResponse_OVER_LIMIT, dstatus(rlsv3.RateLimitResponse_OK, nil, 4, -1),
		dstatus(rlsv3.RateLimitResponse_OVER_LIMIT, nil, 0, -1))
	for _, tc := range []struct {
		name string
		e    *Expect
		a    Answer
		want int
	}{
		{"none", nil, a, 0},
		{"met", &Expect{Overall: "OVER_LIMIT", Codes: []string{"OK", "OVER_LIMIT"}, Remaining: []uint32{4, 0}}, a, 0},
		{"overall", &Expect{Overall: "OK"}, a, 1},
		{"codes and remaining", &Expect{Codes: []string{"OVER_LIMIT", "OVER_LIMIT", "OK"}, Remaining: []uint32{3}}, a, 3},
		{"error wanted", &Expect{Error: true}, a, 1},
		{"error met", &Expect{Error: true}, Answer{Err: errors.New("x")}, 0},
		{"error unwanted", &Expect{Overall: "OK"}, Answer{Err: errors.New("x")}, 1},
	} {
		if got := tc.e.Unmet(tc.a); len(got) != tc.want {
			t.Errorf("%s: Unmet = %q, want %d problems", tc.name, got, tc.want)
		}
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // an hour boundary
	const margin = 150 * time.Millisecond
	for i, tc := range []struct {
		at    time.Duration // after t0
		units []int64
		need  time.Duration
		want  time.Duration // wait
	}{
		{500 * time.Millisecond, nil, time.Hour, 0},
		{500 * time.Millisecond, []int64{1}, 100 * time.Millisecond, 0},
		{800 * time.Millisecond, []int64{1}, 100 * time.Millisecond, 200*time.Millisecond + settle},
		{59*time.Second + 200*time.Millisecond, []int64{1, 60}, 200 * time.Millisecond, 0},
		{59*time.Second + 500*time.Millisecond, []int64{60}, 400 * time.Millisecond, 500*time.Millisecond + settle},
		{59*time.Second + 900*time.Millisecond, []int64{1, 60}, 10 * time.Millisecond, 100*time.Millisecond + settle},
		{30 * time.Second, []int64{60, 3600}, 10 * time.Second, 0},
		{3599 * time.Second, []int64{3600}, 2 * time.Second, time.Second + settle},
		{3599 * time.Second, []int64{60, 86400}, 900 * time.Millisecond, time.Second + settle},
		{3599 * time.Second, []int64{60, 86400}, 500 * time.Millisecond, 0},
	} {
		got, err := Wait(t0.Add(tc.at), tc.units, tc.need, margin)
		if err != nil || got != tc.want {
			t.Errorf("step %d: Wait(t0+%v, %v, %v) = %v, %v; want %v", i, tc.at, tc.units, tc.need, got, err, tc.want)
		}
	}
	if _, err := Wait(t0, []int64{1, 60}, 900*time.Millisecond, margin); err == nil {
		t.Errorf("a 1.05 s scenario fits a 1 s window")
	}
}

func TestStraddled(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 59, 0, time.UTC)
	if u := Straddled(t0, t0.Add(900*time.Millisecond), []int64{1, 60}); u != 0 {
		t.Errorf("inside one second: straddled %d", u)
	}
	if u := Straddled(t0, t0.Add(time.Second), []int64{1, 60}); u != 1 {
		t.Errorf("across a minute: straddled %d, want 1 (the shortest)", u)
	}
	if u := Straddled(t0, t0.Add(time.Second), []int64{3600}); u != 0 {
		t.Errorf("inside one hour: straddled %d", u)
	}
}

func TestUnits(t *testing.T) {
	t.Parallel()
	cfg, err := rlsconf.Parse([]rlsconf.File{{Name: "u.yaml", Data: []byte(`domain: d
descriptors:
  - key: m
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: h
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: u
    rate_limit: {unlimited: true}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	hour := uint64(0)
	s := Scenario{Steps: []Step{
		{Domain: "d", Descriptors: []Descriptor{{Entries: []string{"h=1"}}, {Entries: []string{"m=1"}}}},
		{Domain: "d", Descriptors: []Descriptor{{Entries: []string{"m=2"}, HitsAddend: &hour}, {Entries: []string{"u=1"}}, {Entries: []string{"x=1"}}}},
		{Domain: "d", Descriptors: []Descriptor{{Entries: []string{"x=1"}, Limit: &Override{Unit: "Second"}}}},
		{Domain: "other", Descriptors: []Descriptor{{Entries: []string{"m=1"}}}},
	}}
	if got, want := Units(s, cfg), []int64{1, 60, 3600}; !slices.Equal(got, want) {
		t.Errorf("Units = %v, want %v", got, want)
	}
}

func TestSuites(t *testing.T) {
	t.Parallel()
	// Every suite's configuration loads, its scenarios parse, each fits its
	// windows at the driver's first estimate, and each suite drives some
	// limit over.
	dirs, err := filepath.Glob(filepath.Join("suites", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no suites: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			cfg, err := rlsconf.LoadDir(filepath.Join(dir, "config"))
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, "scenarios.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := ParseFile(data)
			if err != nil {
				t.Fatal(err)
			}
			over := false
			for _, s := range f.Scenarios {
				n := 0
				for _, st := range s.Steps {
					n += st.Times()
					if st.Expect != nil && st.Expect.Overall == "OVER_LIMIT" {
						over = true
					}
				}
				if _, err := Wait(time.Unix(0, 0), Units(s, cfg), time.Duration(n)*5*time.Millisecond*3/2, 150*time.Millisecond); err != nil {
					t.Errorf("%s: %v", s.Name, err)
				}
			}
			if !over {
				t.Errorf("no scenario expects OVER_LIMIT")
			}
		})
	}
}
