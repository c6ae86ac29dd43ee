package redis_test

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// fakeRedis answers every script run (an EVALSHA through Process) with
// reply (or err), and records the keys and arguments it was given.
// Behaviour against a real Redis is tested in integration/.
type fakeRedis struct {
	goredis.UniversalClient // nil: methods other than Process panic
	reply                   []any
	err                     error
	cmd                     string // evalsha, or another command's name
	keys                    []string
	args                    []any
	deadline                bool
}

func (f *fakeRedis) Process(ctx context.Context, c goredis.Cmder) error {
	cmd := unwrap(c)
	a := plainArgs(cmd.Args()) // evalsha, sha, numkeys, keys..., args...
	f.keys = nil
	if a[0] != "evalsha" { // a command on one key: name, key, args...
		f.cmd, f.keys, f.args = a[0].(string), []string{a[1].(string)}, a[2:]
	} else {
		n := int(a[2].(int64))
		for _, k := range a[3 : 3+n] {
			f.keys = append(f.keys, k.(string))
		}
		f.cmd, f.args = "evalsha", a[3+n:]
	}
	_, f.deadline = ctx.Deadline()
	if f.err != nil {
		cmd.SetErr(f.err)
	} else {
		cmd.SetVal(f.reply)
	}
	return cmd.Err()
}

// settable is a command whose reply a fake sets: a *goredis.Cmd, or
// the never-resent wrapper the client sends it in.
type settable interface {
	goredis.Cmder
	SetVal(any)
}

// unwrap returns c, a command of the client's, as a settable.
func unwrap(c goredis.Cmder) settable { return c.(settable) }

// plainArgs returns args as go-redis writes them: a *string or *int64 as
// its value, an encoding.BinaryMarshaler as its bytes (a string), any int
// as an int64.
func plainArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *string:
			out[i] = *v
		case *int64:
			out[i] = *v
		case int:
			out[i] = int64(v)
		case encoding.BinaryMarshaler:
			b, _ := v.MarshalBinary()
			out[i] = string(b)
		default:
			out[i] = a
		}
	}
	return out
}

func newLimiter(t *testing.T, algo string, f *fakeRedis, opts redis.Options) ports.Limiter {
	t.Helper()
	l, err := redis.New(conn.NewClient(f, conn.Options{}), algo, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEveryAlgorithm: the Redis store builds every row of the table, and
// no other name.
func TestEveryAlgorithm(t *testing.T) {
	t.Parallel()
	for _, a := range domain.Algorithms {
		if _, err := redis.New(conn.NewClient(&fakeRedis{}, conn.Options{}), a.Name, redis.Options{}); err != nil {
			t.Errorf("New(%q): %v", a.Name, err)
		}
	}
	if _, err := redis.New(conn.NewClient(&fakeRedis{}, conn.Options{}), "leaky_bucket", redis.Options{}); err == nil {
		t.Error(`New("leaky_bucket") succeeded`)
	}
	// Counting every request is the fixed window's alone: refused elsewhere.
	for _, a := range domain.Algorithms {
		_, err := redis.New(conn.NewClient(&fakeRedis{}, conn.Options{}), a.Name, redis.Options{Counting: domain.CountEvery})
		if (err == nil) != (a.Name == domain.AlgorithmFixedWindow) {
			t.Errorf("New(%q, CountEvery): %v", a.Name, err)
		}
	}
}

func request(cost int64, rules ...domain.Rule) domain.Request {
	req := domain.Request{Tenant: "acme", Route: "default"}
	for i, r := range rules {
		name := []string{"default", "per-day", "third"}[i]
		req.Limits = append(req.Limits, domain.Limit{Name: name, Rule: r, Key: keylayout.Key("rl:", "acme", "x", "", name), Cost: cost})
	}
	return req
}

// reply is a script's reply: admitted, then per limit ok, remaining,
// reset and retry in µs (and the window: 0, the rule's).
func reply(admitted int64, limits ...[4]int64) []any {
	r := []any{admitted}
	for _, l := range limits {
		r = append(r, l[0], l[1], l[2], l[3], int64(0))
	}
	return r
}

// TestLimiterArgs checks what each algorithm sends: the keys, then the
// counting mode, the alignment to the epoch, the kinds, the shadow flags
// and the stride, then each limit's cost, limit and own arguments.
func TestLimiterArgs(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	hour := domain.Rule{Limit: 100, Window: time.Hour}
	tests := []struct {
		algo string
		want []any
	}{
		{"fixed_window", []any{"3", "0", "rr", "01", 3, 3, int64(10), int64(60e3), 3, int64(100), int64(3600e3)}},
		{"sliding_log", []any{"0", "0", "rr", "01", 4, 3, int64(10), int64(60e6), int64(60e3), 3, int64(100), int64(3600e6), int64(3600e3)}},
		{"sliding_window", []any{"0", "0", "rr", "01", 3, 3, int64(10), int64(60e6), 3, int64(100), int64(3600e6)}},
		{"token_bucket", []any{"0", "0", "rr", "01", 4, 3, int64(10), int64(6e9), int64(60e6), 3, int64(100), int64(36e9), int64(3600e6)}},
	}
	for _, tt := range tests {
		f := &fakeRedis{reply: reply(1, [4]int64{1, 7, 60e6, 0}, [4]int64{1, 97, 3600e6, 0})}
		req := request(3, rule, hour)
		req.Limits[1].Shadow = true
		opts := redis.Options{}
		if tt.algo == domain.AlgorithmFixedWindow {
			opts.Counting = domain.CountEvery // the fixed window's alone
		}
		if _, err := newLimiter(t, tt.algo, f, opts).Allow(t.Context(), req, nil); err != nil {
			t.Fatalf("%s: %v", tt.algo, err)
		}
		if len(f.keys) != 2 || f.keys[0] != req.Limits[0].Key || f.keys[1] != req.Limits[1].Key {
			t.Errorf("%s: keys %q", tt.algo, f.keys)
		}
		if !equalArgs(f.args, tt.want) {
			t.Errorf("%s: args %v, want %v", tt.algo, f.args, tt.want)
		}
	}
}

// TestLimiterArgsEnvoy checks what a request of Envoy's rate limit
// service adds: each limit's cost, the quota flags, counting an admitted
// request's every limit (CountHits), and the fixed window's alignment to
// the epoch (WindowsEpoch), script-wide.
func TestLimiterArgsEnvoy(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	f := &fakeRedis{reply: reply(1, [4]int64{1, 7, 60e6, 0}, [4]int64{1, 97, 3600e6, 0}, [4]int64{1, 9, 60e6, 0})}
	req := request(1, rule, rule, rule)
	req.Limits[0].Quota = true
	req.Limits[1].Quota, req.Limits[1].Shadow = true, true
	req.Limits[0].Cost, req.Limits[1].Cost, req.Limits[2].Cost = 3, 0, 12
	l := newLimiter(t, "fixed_window", f, redis.Options{Counting: domain.CountHits, Windows: domain.WindowsEpoch})
	if _, err := l.Allow(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := []any{"2", "1", "rrr", "230", 3, 3, int64(10), int64(60e3), 0, int64(10), int64(60e3), 12, int64(10), int64(60e3)}
	if !equalArgs(f.args, want) {
		t.Errorf("args %v, want %v", f.args, want)
	}
}

// TestLimiterVerdict: Go maps the script's verdict as it is, limit by
// limit, and derives the outcome; a reply that contradicts itself is an
// error, never a guess.
func TestLimiterVerdict(t *testing.T) {
	t.Parallel()
	small, big := domain.Rule{Limit: 3, Window: time.Minute}, domain.Rule{Limit: 100, Window: time.Hour}
	tests := []struct {
		name    string
		shadow  bool // the first limit is in shadow mode
		reply   []any
		want    domain.Verdict
		wantErr bool
	}{
		{"admitted", false, reply(1, [4]int64{1, 2, 60e6, 0}, [4]int64{1, 99, 3600e6, 0}),
			domain.Verdict{Allowed: true, Decisions: []domain.Decision{
				{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute},
				{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: time.Hour}}}, false},
		{"denied by the first", false, reply(0, [4]int64{0, 0, 30e6, 30e6 + 1}, [4]int64{1, 60, 1800e6, 0}),
			domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{
				{Limit: 3, ResetAfter: 30 * time.Second, RetryAfter: 30*time.Second + time.Microsecond},
				{Allowed: true, Limit: 100, Remaining: 60, ResetAfter: 30 * time.Minute}}}, false},
		{"a shadow denial admits", true, reply(1, [4]int64{0, 0, 30e6, 30e6}, [4]int64{1, 99, 3600e6, 0}),
			domain.Verdict{Allowed: true, Outcome: domain.OutcomeShadowDenied, Decisions: []domain.Decision{
				{Limit: 3, ResetAfter: 30 * time.Second, RetryAfter: 30 * time.Second, Shadow: true},
				{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: time.Hour}}}, false},
		{"admitted over an enforced denial", false, reply(1, [4]int64{0, 0, 30e6, 30e6}, [4]int64{1, 99, 3600e6, 0}), domain.Verdict{}, true},
		{"denied with every limit admitting", false, reply(0, [4]int64{1, 2, 60e6, 0}, [4]int64{1, 99, 3600e6, 0}), domain.Verdict{}, true},
		{"a short reply", false, []any{int64(1), int64(1)}, domain.Verdict{}, true},
	}
	for _, tt := range tests {
		f := &fakeRedis{reply: tt.reply}
		req := request(1, small, big)
		req.Limits[0].Shadow = tt.shadow
		v, err := newLimiter(t, "sliding_window", f, redis.Options{}).Allow(t.Context(), req, nil)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if v.Allowed != tt.want.Allowed || v.Outcome != tt.want.Outcome || len(v.Decisions) != len(tt.want.Decisions) {
			t.Errorf("%s: %+v, want %+v", tt.name, v, tt.want)
			continue
		}
		for i := range v.Decisions {
			if v.Decisions[i] != tt.want.Decisions[i] {
				t.Errorf("%s: decision %d %+v, want %+v", tt.name, i, v.Decisions[i], tt.want.Decisions[i])
			}
		}
	}
	// With room in dst, the verdict's decisions are written there.
	f := &fakeRedis{reply: reply(1, [4]int64{1, 2, 60e6, 0})}
	req := request(1, small)
	dst := make([]domain.Decision, 0, 1)
	v, err := newLimiter(t, "fixed_window", f, redis.Options{}).Allow(t.Context(), req, dst)
	if err != nil || &v.Decisions[0] != &dst[:1][0] {
		t.Errorf("verdict %+v, %v: want its decision in dst", v, err)
	}
}

// equalArgs reports whether a and b are the same arguments on the
// wire, where every one is a string.
func equalArgs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if fmt.Sprint(a[i]) != fmt.Sprint(b[i]) {
			return false
		}
	}
	return true
}

func TestLimiterWrapsErrors(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 1, Window: time.Second}
	for _, a := range domain.Algorithms {
		f := &fakeRedis{err: context.DeadlineExceeded}
		v, err := newLimiter(t, a.Name, f, redis.Options{Timeout: time.Second}).Allow(t.Context(), request(1, rule), nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v, want one wrapping context.DeadlineExceeded", a.Name, err)
		}
		if want := `redis: ` + a.Name + ` rl:{acme}:x: `; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q, want prefix %q", a.Name, err, want)
		}
		if v.Allowed || v.Decisions != nil {
			t.Errorf("%s: verdict on error %+v, want the zero value", a.Name, v)
		}
		if !f.deadline {
			t.Errorf("%s: the script ran without the per-decision deadline", a.Name)
		}
	}
}

// TestLimiterCalendarArgs: a calendar limit is sent with its period and
// the periods on either side (their keys after the limits' own, their
// bounds as its arguments, padded to one stride), and its reply's window
// becomes the decision's.
func TestLimiterCalendarArgs(t *testing.T) {
	t.Parallel()
	cal := domain.Calendar{Unit: domain.PeriodDay}
	daily := domain.Limit{Name: "daily", Cost: 1, Rule: domain.Rule{Limit: 1000, Window: domain.NominalWindow(domain.PeriodDay)},
		Key: "rl:{acme}:daily", Calendar: &cal}
	req := request(1, domain.Rule{Limit: 10, Window: time.Minute})
	req.Limits = append(req.Limits, daily)
	f := &fakeRedis{reply: append(reply(1, [4]int64{1, 9, 60e6, 0}), int64(1), int64(999), int64(3600e6), int64(0), int64(86400e6))}
	v, err := newLimiter(t, "token_bucket", f, redis.Options{}).Allow(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(n int) string { return keylayout.PeriodKey(daily.Key, start.AddDate(0, 0, n)) }
	if want := []string{req.Limits[0].Key, day(0), day(-1), day(1)}; !slices.Equal(f.keys, want) {
		t.Errorf("keys %q, want %q", f.keys, want)
	}
	ms := func(n int) int64 { return start.AddDate(0, 0, n).UnixMilli() }
	want := []any{"0", "0", "rc", "00", 6, 1, int64(10), int64(6e9), int64(60e6), 0, 0,
		1, int64(1000), ms(-1), ms(0), ms(1), ms(2)}
	if !equalArgs(f.args, want) {
		t.Errorf("args %v, want %v", f.args, want)
	}
	if d := v.Decisions[1]; d.Window != 24*time.Hour || d.Remaining != 999 {
		t.Errorf("the calendar decision %+v, want its period's window, 24h", d)
	}
}

// slotsRedis is a fakeRedis that sends each ZREM it is given (a
// release) on zrems, as its key and members, and answers it once gate is
// closed.
type slotsRedis struct {
	*fakeRedis
	zrems chan []any
	gate  chan struct{}
}

func (f slotsRedis) Process(ctx context.Context, c goredis.Cmder) error {
	if a := c.Args(); a[0] == "zrem" {
		f.zrems <- a[1:]
		<-f.gate
		unwrap(c).SetVal(int64(len(a) - 2))
		return nil
	}
	return f.fakeRedis.Process(ctx, c)
}

// TestLimiterSlotArgs: a concurrency limit is kind 'n' with its cost,
// its limit, the lease in ms, the request's holder and no holder to remove first;
// an admitted verdict's Release has the releaser send the holder's
// removal (one ZREM) once, and until it is confirmed the next decision
// on the key removes the holder first; without leases the request fails.
func TestLimiterSlotArgs(t *testing.T) {
	t.Parallel()
	inflight := domain.Limit{Name: "inflight", Cost: 3, Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow},
		Key: "rl:{acme}:in_flight:inflight", Concurrency: true}
	req := request(3, domain.Rule{Limit: 10, Window: time.Minute})
	req.Limits = append(req.Limits, inflight)
	f := slotsRedis{&fakeRedis{reply: reply(1, [4]int64{1, 7, 60e6, 0}, [4]int64{1, 4, 0, 0})}, make(chan []any, 4), make(chan struct{})}
	client := conn.NewClient(f, conn.Options{})
	leases := fleet.NewLeases(client, fleet.LeaseOptions{Lease: 3 * time.Second, Replica: "r1"})
	defer leases.Close()
	l, err := redis.New(client, domain.AlgorithmFixedWindow, redis.Options{Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Allow(t.Context(), req, nil)
	if err != nil || !v.Allowed || v.Release == nil || v.Decisions[1].Remaining != 4 {
		t.Fatalf("Allow: %+v, %v; want admitted, 4 slots free, a Release", v, err)
	}
	if len(f.args) != 17 {
		t.Fatalf("args %v", f.args)
	}
	holder, _ := f.args[14].(string)
	want := []any{"0", "0", "rn", "00", 6, 3, int64(10), int64(60e3), 0, 0, 0, 3, int64(5), int64(3000), holder, 0, 0}
	if !equalArgs(f.args, want) || !strings.HasPrefix(holder, "r1:") {
		t.Errorf("args %v, want %v with a holder r1:…", f.args, want)
	}
	if got := leases.Held(); got != 1 {
		t.Errorf("Held = %d, want 1", got)
	}
	v.Release()
	v.Release()
	if leases.Held() != 0 {
		t.Errorf("Held after the release = %d, want 0 (no longer renewed)", leases.Held())
	}
	select {
	case got := <-f.zrems:
		if !equalArgs(got, []any{inflight.Key, holder}) {
			t.Errorf("release: ZREM %v, want %s %s", got, inflight.Key, holder)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ZREM 5s after the release")
	}
	// Redis has not confirmed the removal yet: the next decision on the
	// key removes the holder first.
	if _, err := l.Allow(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(f.args); n != 18 || !equalArgs(f.args[15:], []any{18, 1, holder}) {
		t.Errorf("a decision while the release is unconfirmed: args %v, want the holder to remove first (ARGV[18], 1)", f.args)
	}
	close(f.gate)
	select {
	case got := <-f.zrems:
		t.Errorf("a second Release sent ZREM %v", got)
	case <-time.After(50 * time.Millisecond):
	}
	// Confirmed: nothing to remove first; another request, another
	// holder.
	f.reply = reply(1, [4]int64{1, 6, 60e6, 0}, [4]int64{1, 4, 0, 0})
	if _, err := l.Allow(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	if other := f.args[14]; other == holder || len(f.args) != 17 {
		t.Errorf("after the removal was confirmed: args %v, want a new holder and nothing to remove", f.args)
	}
	// A denied request holds nothing.
	f.reply = reply(0, [4]int64{1, 6, 60e6, 0}, [4]int64{0, 0, 1e6, 1e6})
	if v, err := l.Allow(t.Context(), req, nil); err != nil || v.Allowed || v.Release != nil {
		t.Errorf("denied for want of a slot: %+v, %v; want no Release", v, err)
	}
	if _, err := newLimiter(t, domain.AlgorithmFixedWindow, f.fakeRedis, redis.Options{}).Allow(t.Context(), req, nil); err == nil {
		t.Error("a concurrency limit without leases: no error")
	}
}
