package domain_test

import (
	"testing"

	"github.com/tollgate/tollgate/domain"
)

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		algorithm, route, limit string
		want                    string
	}{
		{domain.AlgorithmFixedWindow, "", domain.DefaultLimit, "rl:{acme}"},
		{domain.AlgorithmFixedWindow, "", "per-day", "rl:{acme}:per-day"},
		{domain.AlgorithmSlidingLog, "", domain.DefaultLimit, "rl:{acme}:sliding_log"},
		{domain.AlgorithmTokenBucket, "", "per-second", "rl:{acme}:token_bucket:per-second"},
		{domain.AlgorithmFixedWindow, "export", "exports", "rl:{acme}:route:export:exports"},
		{domain.AlgorithmSlidingWindow, "export", "default", "rl:{acme}:sliding_window:route:export:default"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		got := domain.Key("rl:", "acme", tt.algorithm, tt.route, tt.limit)
		if got != tt.want {
			t.Errorf("Key(rl:, acme, %s, %q, %s) = %q, want %q", tt.algorithm, tt.route, tt.limit, got, tt.want)
		}
		if seen[got] {
			t.Errorf("key %q built twice", got)
		}
		seen[got] = true
	}
	if got, want := domain.Key("rl:", domain.Unknown, domain.AlgorithmFixedWindow, "", domain.DefaultLimit), "rl:{unknown}"; got != want {
		t.Errorf("Key of unknown = %q, want %q", got, want)
	}
}

// TestKeysNeverCollide: no (algorithm, route, limit) of one tenant shares
// a key with another, across every algorithm, so switching algorithms on
// a live Redis never meets a WRONGTYPE.
func TestKeysNeverCollide(t *testing.T) {
	t.Parallel()
	algorithms := []string{domain.AlgorithmFixedWindow, domain.AlgorithmSlidingLog, domain.AlgorithmSlidingWindow, domain.AlgorithmTokenBucket}
	routes := []string{"", "route", "a", "default"}
	limits := []string{domain.DefaultLimit, "route", "a", "per-day"}
	seen := map[string]string{}
	for _, a := range algorithms {
		for _, r := range routes {
			for _, l := range limits {
				k := domain.Key("rl:", "acme", a, r, l)
				who := a + "/" + r + "/" + l
				if other, ok := seen[k]; ok {
					t.Errorf("%s and %s share key %q", who, other, k)
				}
				seen[k] = who
			}
		}
	}
}
