package keys_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		algorithm, route, limit string
		want                    string
	}{
		{domain.AlgorithmFixedWindow, "", domain.DefaultLimit, "rl:{acme}"},
		{domain.AlgorithmFixedWindow, "", "per-day", "rl:{acme}:per-day"},
		{domain.AlgorithmSlidingLog, "", domain.DefaultLimit, "rl:{acme}:sliding_log_w"},
		{domain.AlgorithmTokenBucket, "", "per-second", "rl:{acme}:token_bucket:per-second"},
		{domain.AlgorithmFixedWindow, "export", "exports", "rl:{acme}:route:export:exports"},
		{domain.AlgorithmSlidingWindow, "export", "default", "rl:{acme}:sliding_window:route:export:default"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		got := keys.Key("rl:", "acme", tt.algorithm, tt.route, tt.limit)
		if got != tt.want {
			t.Errorf("Key(rl:, acme, %s, %q, %s) = %q, want %q", tt.algorithm, tt.route, tt.limit, got, tt.want)
		}
		if seen[got] {
			t.Errorf("key %q built twice", got)
		}
		seen[got] = true
	}
	if got, want := keys.Key("rl:", domain.Unknown, domain.AlgorithmFixedWindow, "", domain.DefaultLimit), "rl:{unknown}"; got != want {
		t.Errorf("Key of unknown = %q, want %q", got, want)
	}
}

// TestKeysNeverCollide: no (algorithm, route, limit) of one tenant shares
// a key with another, across every algorithm, so switching algorithms on
// a live Redis never meets a WRONGTYPE.
func TestKeysNeverCollide(t *testing.T) {
	t.Parallel()
	algorithms := domain.AlgorithmNames()
	routes := []string{"", "route", "a", "default"}
	limits := []string{domain.DefaultLimit, "route", "a", "per-day"}
	seen := map[string]string{}
	for _, a := range algorithms {
		for _, r := range routes {
			for _, l := range limits {
				k := keys.Key("rl:", "acme", a, r, l)
				who := a + "/" + r + "/" + l
				for _, k := range []string{k, keys.Reserved(k)} {
					if other, ok := seen[k]; ok {
						t.Errorf("%s and %s share key %q", who, other, k)
					}
					seen[k] = who
				}
			}
		}
	}
}

func TestAppendDescriptorKey(t *testing.T) {
	tests := []struct {
		domain, algorithm string
		window            time.Duration
		counter           string
		want              string
	}{
		{"test-domain", domain.AlgorithmFixedWindow, time.Minute, "key2_value2_", "rl:{rls:test-domain}:fixed_window:60s:key2_value2_"},
		{"test-domain", domain.AlgorithmTokenBucket, time.Second, "k_v_sub_x_", "rl:{rls:test-domain}:token_bucket:1s:k_v_sub_x_"},
		{"a}b%c", domain.AlgorithmFixedWindow, 1500 * time.Millisecond, "k_v_", "rl:{rls:a%7Db%25c}:fixed_window:1500ms:k_v_"},
	}
	for _, tt := range tests {
		got := string(keys.AppendDescriptorKey(nil, "rl:", tt.domain, tt.algorithm, tt.window, []byte(tt.counter)))
		if got != tt.want {
			t.Errorf("AppendDescriptorKey(%q, %s, %v, %q) = %q, want %q", tt.domain, tt.algorithm, tt.window, tt.counter, got, tt.want)
		}
	}
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() {
		keys.AppendDescriptorKey(buf[:0], "rl:", "d", domain.AlgorithmFixedWindow, time.Hour, []byte("k_v_"))
	}); n != 0 {
		t.Errorf("AppendDescriptorKey with room allocates %v times, want 0", n)
	}
}

// TestDescriptorKeysNeverCollide: descriptor keys differ from every
// tenant's and client's key (their hash tags differ), from one another's
// across domains whose names differ only by an escaped byte, across
// algorithms and window lengths; and each holds its domain as the hash
// tag, so one request's keys share a slot.
func TestDescriptorKeysNeverCollide(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	add := func(k, who string) {
		t.Helper()
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share key %q", who, other, k)
		}
		seen[k] = who
	}
	for _, tenant := range []domain.TenantID{"rls", "acme", domain.Unknown, "ip:203.0.113.7"} {
		for _, a := range domain.AlgorithmNames() {
			add(keys.Key("rl:", tenant, a, "", domain.DefaultLimit), "tenant "+string(tenant)+" "+a)
			add(keys.Key("rl:", tenant, a, "r", "l"), "tenant route "+string(tenant)+" "+a)
		}
	}
	for _, d := range []string{"acme", "rls", "a}", "a%7D", "a}:fixed_window:60s:x_y_", "a"} {
		for _, a := range domain.AlgorithmNames() {
			for _, w := range []time.Duration{time.Second, time.Minute, 60 * time.Millisecond} {
				k := string(keys.AppendDescriptorKey(nil, "rl:", d, a, w, []byte("x_y_")))
				add(k, "descriptor "+d+" "+a+" "+w.String())
				if tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]; !strings.HasPrefix(tag, "rls:") {
					t.Errorf("key %q: hash tag %q is not the domain's", k, tag)
				}
			}
		}
	}
}

func TestAnonymousSubjectKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string
	}{
		{"203.0.113.7", "rl:{ip:203.0.113.7}"},
		{"2001:db8:1:2::99", "rl:{ip:2001:db8:1:2::/64}"},
	}
	for _, tt := range tests {
		s := domain.AnonymousSubject(netip.MustParseAddr(tt.addr), 64)
		if got := keys.Key("rl:", s, domain.AlgorithmFixedWindow, "", domain.DefaultLimit); got != tt.want {
			t.Errorf("Key of %s = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestReserved: a Reserve limit's reservations are in its key's slot.
func TestReserved(t *testing.T) {
	t.Parallel()
	if got, want := keys.Reserved("rl:{acme}:tokens"), "rl:{acme}:tokens~reserved"; got != want {
		t.Errorf("Reserved = %q, want %q", got, want)
	}
}

func TestPeriodKey(t *testing.T) {
	start := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)
	if got, want := keys.PeriodKey("rl:{acme}:monthly", start), "rl:{acme}:monthly@1801440000"; got != want {
		t.Errorf("PeriodKey = %q, want %q", got, want)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { keys.AppendPeriodKey(buf[:0], "rl:{acme}:monthly", start) }); n != 0 {
		t.Errorf("AppendPeriodKey with room allocates %v times, want 0", n)
	}
}

// TestLayout: a layout names a rate limit's key with the store's
// algorithm, a calendar limit's with the fixed window's shape, a
// concurrency limit's with in_flight; the zero value is the fixed
// window's without a prefix.
func TestLayout(t *testing.T) {
	t.Parallel()
	l := keys.Layout{Prefix: "rl:", Algorithm: domain.AlgorithmTokenBucket}
	for _, tt := range []struct {
		kind ports.KeyKind
		want string
	}{
		{ports.KeyRate, "rl:{acme}:token_bucket:route:r:x"},
		{ports.KeyCalendar, "rl:{acme}:route:r:x"},
		{ports.KeyConcurrency, "rl:{acme}:in_flight:route:r:x"},
	} {
		if got := l.Limit("acme", "r", "x", tt.kind); got != tt.want {
			t.Errorf("Limit(kind %d) = %q, want %q", tt.kind, got, tt.want)
		}
	}
	if got := (keys.Layout{}).Limit("acme", "", domain.DefaultLimit, ports.KeyRate); got != "{acme}" {
		t.Errorf("the zero layout's default limit = %q, want {acme}", got)
	}
	if got := string(l.AppendDescriptor(nil, "d", time.Minute, []byte("k_v_"))); got != "rl:{rls:d}:token_bucket:60s:k_v_" {
		t.Errorf("AppendDescriptor = %q", got)
	}
	if got := l.Tenant("acme"); got != "rl:{acme}" {
		t.Errorf("Tenant = %q, want rl:{acme}", got)
	}
}

// TestFamily: a descriptor key's family is its domain, algorithm, window
// and first entry's key, without the values; other keys have none.
func TestFamily(t *testing.T) {
	t.Parallel()
	l := keys.Layout{Prefix: "rl:"}
	desc := func(d string, w time.Duration, counter string) string {
		return string(keys.AppendDescriptorKey(nil, "rl:", d, domain.AlgorithmFixedWindow, w, []byte(counter)))
	}
	for _, c := range []struct{ key, want string }{
		{desc("edge", time.Hour, "user_mallory-1_"), "rl:{rls:edge}:fixed_window:3600s:user_"},
		{desc("edge", time.Hour, "user_alice_path_/login_"), "rl:{rls:edge}:fixed_window:3600s:user_"},
		{desc("edge", time.Minute, "user_alice_"), "rl:{rls:edge}:fixed_window:60s:user_"},
		{desc("a}b_c", time.Hour, "path_/x_"), "rl:{rls:a%7Db_c}:fixed_window:3600s:path_"},
		{desc("edge", time.Hour, "nounderscore"), desc("edge", time.Hour, "nounderscore")},
		{keys.Key("rl:", "acme", domain.AlgorithmFixedWindow, "", "default"), ""},
		{keys.Key("rl:", domain.AnonymousSubject(netip.MustParseAddr("192.0.2.1"), 64), domain.AlgorithmTokenBucket, "", "default"), ""},
		{"other:{rls:edge}:fixed_window:60s:user_a_", ""},
		{"rl:{rls:edge", ""},
		{"rl:{rls:edge}:fixed_window", ""},
	} {
		if got := l.Family(c.key); got != c.want {
			t.Errorf("Family(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
