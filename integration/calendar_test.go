package integration

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// TestRedisCalendarQuota: a calendar limit on Redis and on a Redis
// Cluster: its key is the period's ("…@<start>"), expires within a day
// of the period's end (a minute after it), its window is the period's
// real length, and every algorithm counts it as a fixed window.
func TestRedisCalendarQuota(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name string
		rdb  goredis.UniversalClient
	}{{"redis", startRedis(t).Client}, {"cluster", sharedClusterFor(t).Client}} {
		for _, a := range domain.Algorithms {
			lim := redisLimiter{algorithm: a.Name}.new(conn.NewClient(target.rdb, testConn), redis.Options{Timeout: 5 * time.Second})
			cal := domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: 31}
			base := keys.Key(uniquePrefix(t), "acme", domain.AlgorithmFixedWindow, "", "monthly")
			req := domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{{Name: "monthly",
				Rule: domain.Rule{Limit: 5, Window: domain.NominalWindow(cal.Unit)}, Key: base, Cost: 2, Calendar: &cal}}}
			start, end := cal.Period(time.Now())
			var last domain.Decision
			for i, want := range []bool{true, true, false} {
				v, err := lim.Allow(t.Context(), req, nil)
				if err != nil {
					t.Fatalf("%s %s: %v", target.name, a.Name, err)
				}
				last = v.Decisions[0]
				if last.Allowed != want || last.Window != end.Sub(start) {
					t.Errorf("%s %s request %d: %+v, want allowed=%v in a window of %v", target.name, a.Name, i+1, last, want, end.Sub(start))
				}
			}
			if wait := time.Until(end); last.RetryAfter < wait-5*time.Second || last.RetryAfter > wait+time.Second {
				t.Errorf("%s %s: RetryAfter %v, want the period's end, %v away", target.name, a.Name, last.RetryAfter, wait)
			}
			key := keys.PeriodKey(base, start)
			ttl := target.rdb.PTTL(t.Context(), key).Val()
			if n := target.rdb.Get(t.Context(), key).Val(); n != "4" || ttl < time.Until(end) || ttl > time.Until(end)+time.Minute+time.Second {
				t.Errorf("%s %s: key %s holds %q with TTL %v, want 4 and the period's end plus a minute (%v)", target.name, a.Name, key, n, ttl, time.Until(end))
			}
			// A period's key found without a TTL (written by something
			// else) gets one at the next spend: none counts forever.
			if err := target.rdb.Persist(t.Context(), key).Err(); err != nil {
				t.Fatal(err)
			}
			req.Limits[0].Cost = 1
			if v, err := lim.Allow(t.Context(), req, nil); err != nil || !v.Allowed {
				t.Fatalf("%s %s: the last unit: %+v, %v", target.name, a.Name, v, err)
			}
			if ttl := target.rdb.PTTL(t.Context(), key).Val(); ttl < time.Until(end) || ttl > time.Until(end)+time.Minute+time.Second {
				t.Errorf("%s %s: key %s without a TTL, after a spend: TTL %v, want the period's end plus a minute", target.name, a.Name, key, ttl)
			}
		}
	}
}

// TestRedisCalendarClockSkew: a replica whose clock is a day behind
// Redis's, or a day ahead, still counts a daily quota in the day Redis's
// clock holds, whether the key of its own day is new or already there
// (its TTL telling Redis's time), and leaves that key as it was; the
// reset is the end of Redis's day.
func TestRedisCalendarClockSkew(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cal := domain.Calendar{Unit: domain.PeriodDay}
	for _, tt := range []struct {
		name  string
		skew  time.Duration
		there bool // the replica's day's key exists, as a replica of that day left it
	}{
		{"behind, its day's key new", -24 * time.Hour, false},
		{"ahead, its day's key new", 24 * time.Hour, false},
		{"ahead, its day's key there", 24 * time.Hour, true},
	} {
		base := keys.Key(uniquePrefix(t), "acme", domain.AlgorithmFixedWindow, "", "daily")
		lim := redisLimiter{algorithm: domain.AlgorithmFixedWindow}.new(conn.NewClient(srv.Client, testConn),
			redis.Options{Timeout: 5 * time.Second, Clock: func() time.Time { return time.Now().Add(tt.skew) }})
		start, end := cal.Period(time.Now())
		theirs, theirEnd := cal.Period(time.Now().Add(tt.skew))
		theirKey := keys.PeriodKey(base, theirs)
		if tt.there {
			if err := srv.Client.Set(t.Context(), theirKey, 3, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Client.PExpireAt(t.Context(), theirKey, theirEnd.Add(time.Minute)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		req := domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{{Name: "daily",
			Rule: domain.Rule{Limit: 5, Window: domain.NominalWindow(cal.Unit)}, Key: base, Cost: 2, Calendar: &cal}}}
		for i, want := range []bool{true, true, false} {
			v, err := lim.Allow(t.Context(), req, nil)
			if err != nil {
				t.Fatalf("%s, request %d: %v", tt.name, i+1, err)
			}
			d := v.Decisions[0]
			if d.Allowed != want || d.Window != end.Sub(start) {
				t.Errorf("%s, request %d: %+v, want allowed=%v in Redis's day (%v)", tt.name, i+1, d, want, end.Sub(start))
			}
			if wait := time.Until(end); d.ResetAfter < wait-5*time.Second || d.ResetAfter > wait+time.Second {
				t.Errorf("%s, request %d: reset in %v, want the end of Redis's day, %v away", tt.name, i+1, d.ResetAfter, wait)
			}
		}
		if n := srv.Client.Get(t.Context(), keys.PeriodKey(base, start)).Val(); n != "4" {
			t.Errorf("%s: Redis's day's key holds %q, want 4", tt.name, n)
		}
		got, err := srv.Client.Get(t.Context(), theirKey).Result()
		switch {
		case tt.there && got != "3":
			t.Errorf("%s: the replica's day's key holds %q, %v; want 3 as it was", tt.name, got, err)
		case !tt.there && err != goredis.Nil:
			t.Errorf("%s: the replica's day's key holds %q, %v; want none", tt.name, got, err)
		}
	}
}

// TestRedisCalendarReloadMovesEnd: a reload that keeps a calendar
// limit's name and its period's start but moves the period's end (a
// month made a year that starts the same day; an anchor day of 30 made 31
// in a 30-day month) keeps counting in the same key, and each request,
// spent or denied, gives the key the period's new end plus a minute,
// longer or shorter, both for the calendar quota alone (its own script
// path) and beside a window limit (where a denial moves the end too).
func TestRedisCalendarReloadMovesEnd(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim := fixedWindow(srv)
	now := time.Now()
	month := domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: 1}
	year := domain.Calendar{Unit: domain.PeriodYear, AnchorMonth: now.UTC().Month(), AnchorDay: 1}
	ms, me := month.Period(now)
	ys, ye := year.Period(now)
	if !ms.Equal(ys) || !ye.After(me) {
		t.Fatalf("month %v–%v and year %v–%v: want the same start and a later end (run across a month's end?)", ms, me, ys, ye)
	}
	for _, alone := range []bool{true, false} {
		prefix := uniquePrefix(t)
		base := keys.Key(prefix, "acme", domain.AlgorithmFixedWindow, "", "quota")
		key := keys.PeriodKey(base, ms)
		decide := func(cal domain.Calendar, end time.Time, limit int64, admit bool, want string) {
			t.Helper()
			req := domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{{Name: "quota",
				Rule: domain.Rule{Limit: limit, Window: domain.NominalWindow(cal.Unit)}, Key: base, Cost: 1, Calendar: &cal}}}
			if !alone {
				req.Limits = append(req.Limits, domain.Limit{Name: "per-minute", Rule: domain.Rule{Limit: 100, Window: time.Minute}, Cost: 1,
					Key: keys.Key(prefix, "acme", domain.AlgorithmFixedWindow, "", "per-minute")})
			}
			if v, err := lim.Allow(t.Context(), req, nil); err != nil || v.Allowed != admit {
				t.Fatalf("alone=%v, a request in a %v: %+v, %v; want allowed=%v", alone, cal.Unit, v, err, admit)
			}
			ttl := srv.Client.PTTL(t.Context(), key).Val()
			if n := srv.Client.Get(t.Context(), key).Val(); n != want || ttl < time.Until(end) || ttl > time.Until(end)+time.Minute+time.Second {
				t.Errorf("alone=%v, after a request in a %v: key %s holds %q with TTL %v, want %s and the period's end plus a minute (%v)",
					alone, cal.Unit, key, n, ttl, want, time.Until(end))
			}
		}
		decide(month, me, 100, true, "1")
		decide(year, ye, 100, true, "2")  // the end moved later: the key lives on to it
		decide(month, me, 100, true, "3") // and back: the count ends with the month again
		// A denial moves the end too: the quota spent, then the end moved.
		decide(year, ye, 3, false, "3")
	}
}
