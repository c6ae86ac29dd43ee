package redis_test

import (
	"testing"
	"time"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestReserveArgsAndReply: a Reserve limit's flag has 4 added, its
// reservations' key follows the limit keys, and the reply's values after
// every limit's are its spend and mark (in a peek, its reservations in
// flight), mapped onto its decision.
func TestReserveArgsAndReply(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	tokens := domain.Rule{Limit: 1000, Window: time.Minute}
	req := request(1, rule, tokens)
	req.Limits[1].Cost, req.Limits[1].Reserve = 300, true
	f := &fakeRedis{reply: append(reply(1, [4]int64{1, 9, 60e6, 0}, [4]int64{1, 0, 60e6, 0}), int64(250), int64(1765000000000), int64(0))}
	l := newLimiter(t, "fixed_window", f, redis.Options{})
	v, err := l.Allow(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{req.Limits[0].Key, req.Limits[1].Key, keylayout.Reserved(req.Limits[1].Key)}; !equalStrings(f.keys, want) {
		t.Errorf("keys %q, want %q", f.keys, want)
	}
	if want := []any{"0", "0", "rr", "04", 4, 1, int64(10), int64(60e3), 0, int64(300), int64(1000), int64(60e3), 1}; !equalArgs(f.args, want) {
		t.Errorf("args %v, want %v", f.args, want)
	}
	if d := v.Decisions[1]; d.Spent != 250 || d.Mark != 1765000000000 || v.Decisions[0].Spent != 0 {
		t.Errorf("decisions %+v, want the Reserve limit's spent 250 at its mark", v.Decisions)
	}

	// A usage read: the third value is the reservations in flight.
	f.reply = append(reply(1, [4]int64{1, 9, 60e6, 0}, [4]int64{1, 700, 60e6, 0}), int64(0), int64(-1), int64(250))
	v, err = l.(ports.Usage).Peek(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d := v.Decisions[1]; d.Reserved != 250 || d.Spent != 0 || d.Mark != 0 {
		t.Errorf("peek %+v, want 250 reserved, nothing spent", d)
	}
}

// TestSettleArgs: a settlement sends the Reserve limits alone, each
// with what to spend more (used − spent) and, after every limit's
// arguments, its mark and spend; a limit that spent nothing is left out,
// and with nothing to settle nothing is sent.
func TestSettleArgs(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	tokens := domain.Rule{Limit: 1000, Window: time.Minute}
	req := request(1, rule, tokens, tokens)
	req.Limits[1].Reserve, req.Limits[2].Reserve = true, true
	adm := []domain.Decision{{}, {Spent: 300, Mark: 1765000000000}, {Spent: 0, Mark: domain.NoMark}}
	f := &fakeRedis{reply: []any{int64(1)}}
	l := newLimiter(t, "token_bucket", f, redis.Options{}).(ports.Settler)
	if err := l.Settle(t.Context(), req, adm, 120); err != nil {
		t.Fatal(err)
	}
	if want := []string{req.Limits[1].Key, keylayout.Reserved(req.Limits[1].Key)}; !equalStrings(f.keys, want) {
		t.Errorf("keys %q, want %q", f.keys, want)
	}
	want := []any{"s", "0", "r", "4", 5, int64(-180), int64(1000), int64(60e6), int64(60e6), 1, int64(1765000000000), int64(300)}
	if !equalArgs(f.args, want) {
		t.Errorf("args %v, want %v", f.args, want)
	}
	// Without an admission: used is charged now (mark and spend 0).
	if err := l.Settle(t.Context(), req, nil, 70); err != nil {
		t.Fatal(err)
	}
	want = []any{"s", "0", "rr", "44", 5, int64(70), int64(1000), int64(60e6), int64(60e6), 1, int64(70), int64(1000), int64(60e6), int64(60e6), 1, 0, 0, 0, 0}
	if !equalArgs(f.args, want) {
		t.Errorf("a report: args %v, want %v", f.args, want)
	}
	f.cmd = ""
	if err := l.Settle(t.Context(), req, []domain.Decision{{}, {Mark: domain.NoMark}, {Mark: domain.NoMark}}, 50); err != nil || f.cmd != "" {
		t.Errorf("nothing to settle: %v, sent %q", err, f.cmd)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
