package main

import (
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"
)

// Answer is one server's reply to a request: a response or a gRPC error.
type Answer struct {
	Resp *rlsv3.RateLimitResponse
	Err  error
}

// Diff lists how b's answer differs from a's, one line per field:
// whether each failed (and, with errorText, the error messages),
// overall_code, the number of statuses, and per status its code,
// current_limit (nil or not; requests_per_unit, unit, name),
// limit_remaining and duration_until_reset (nil or not; seconds within
// ±1, since the two calls are made one after the other and may straddle a
// second). Headers, metadata and quota fields are not compared.
func Diff(a, b Answer, errorText bool) []string {
	var d []string
	add := func(field string, av, bv any) {
		d = append(d, fmt.Sprintf("%s: a=%v b=%v", field, av, bv))
	}
	if (a.Err != nil) != (b.Err != nil) {
		add("error", errString(a.Err), errString(b.Err))
		return d
	}
	if a.Err != nil {
		if am, bm := status.Convert(a.Err).Message(), status.Convert(b.Err).Message(); errorText && am != bm {
			add("error text", fmt.Sprintf("%q", am), fmt.Sprintf("%q", bm))
		}
		return d
	}
	if a.Resp.GetOverallCode() != b.Resp.GetOverallCode() {
		add("overall_code", a.Resp.GetOverallCode(), b.Resp.GetOverallCode())
	}
	as, bs := a.Resp.GetStatuses(), b.Resp.GetStatuses()
	if len(as) != len(bs) {
		add("len(statuses)", len(as), len(bs))
		return d
	}
	for i := range as {
		p := fmt.Sprintf("statuses[%d].", i)
		x, y := as[i], bs[i]
		if x.GetCode() != y.GetCode() {
			add(p+"code", x.GetCode(), y.GetCode())
		}
		xl, yl := x.GetCurrentLimit(), y.GetCurrentLimit()
		switch {
		case (xl == nil) != (yl == nil):
			add(p+"current_limit", limitString(xl), limitString(yl))
		case xl != nil:
			if xl.GetRequestsPerUnit() != yl.GetRequestsPerUnit() {
				add(p+"current_limit.requests_per_unit", xl.GetRequestsPerUnit(), yl.GetRequestsPerUnit())
			}
			if xl.GetUnit() != yl.GetUnit() {
				add(p+"current_limit.unit", xl.GetUnit(), yl.GetUnit())
			}
			if xl.GetName() != yl.GetName() {
				add(p+"current_limit.name", fmt.Sprintf("%q", xl.GetName()), fmt.Sprintf("%q", yl.GetName()))
			}
		}
		if x.GetLimitRemaining() != y.GetLimitRemaining() {
			add(p+"limit_remaining", x.GetLimitRemaining(), y.GetLimitRemaining())
		}
		xr, yr := x.GetDurationUntilReset(), y.GetDurationUntilReset()
		switch {
		case (xr == nil) != (yr == nil):
			add(p+"duration_until_reset", xr.AsDuration(), yr.AsDuration())
		case xr != nil:
			if delta := xr.GetSeconds() - yr.GetSeconds(); delta > 1 || delta < -1 {
				add(p+"duration_until_reset", xr.AsDuration(), yr.AsDuration())
			}
		}
	}
	return d
}

// Unmet lists how a reference answer misses an expectation.
func (e *Expect) Unmet(a Answer) []string {
	if e == nil {
		return nil
	}
	var d []string
	if e.Error != (a.Err != nil) {
		return []string{fmt.Sprintf("error: got %s, want error=%v", errString(a.Err), e.Error)}
	}
	if a.Err != nil {
		return nil
	}
	if e.Overall != "" && a.Resp.GetOverallCode().String() != e.Overall {
		d = append(d, fmt.Sprintf("overall_code: got %v, want %s", a.Resp.GetOverallCode(), e.Overall))
	}
	st := a.Resp.GetStatuses()
	for i, c := range e.Codes {
		if i >= len(st) || st[i].GetCode().String() != c {
			d = append(d, fmt.Sprintf("statuses[%d].code: got %s, want %s", i, codeAt(st, i), c))
		}
	}
	for i, r := range e.Remaining {
		if i >= len(st) || st[i].GetLimitRemaining() != r {
			d = append(d, fmt.Sprintf("statuses[%d].limit_remaining: got %s, want %d", i, remainingAt(st, i), r))
		}
	}
	return d
}

func codeAt(st []*rlsv3.RateLimitResponse_DescriptorStatus, i int) string {
	if i >= len(st) {
		return "nothing"
	}
	return st[i].GetCode().String()
}

func remainingAt(st []*rlsv3.RateLimitResponse_DescriptorStatus, i int) string {
	if i >= len(st) {
		return "nothing"
	}
	return fmt.Sprint(st[i].GetLimitRemaining())
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	s := status.Convert(err)
	return fmt.Sprintf("%s %q", s.Code(), s.Message())
}

func limitString(l *rlsv3.RateLimitResponse_RateLimit) string {
	if l == nil {
		return "nil"
	}
	return fmt.Sprintf("{%d/%v %q}", l.GetRequestsPerUnit(), l.GetUnit(), l.GetName())
}
