package domain

import (
	"testing"
	"time"
)

func TestDecideSlidingWindow(t *testing.T) {
	t.Parallel()
	rule := Rule{Limit: 10, Window: time.Minute}
	tests := []struct {
		prev, curr int64
		elapsed    time.Duration
		want       Decision
	}{
		{0, 0, 0, allowedAt(10, 9, 120*s)},
		{0, 0, -s, allowedAt(10, 9, 120*s)},            // clock stepped back
		{4, 0, 59 * s, allowedAt(10, 9, 61*s)},         // weight ⌊4/60⌋ = 0
		{20, 0, 0, deniedAt(10, 60*s, 30*s+1)},         // 20×(60−x)/60 < 10 once x > 30s
		{0, 12, 0, deniedAt(10, 120*s, 70*s+1)},        // limit shrank: 12×(60−u)/60 < 10 once u > 10s
		{9, 9, 59 * s, allowedAt(10, 0, 61*s)},         // 9×1/60 + 9 < 10
		{60, 9, 59 * s, deniedAt(10, 61*s, 1)},         // 60×(60s−x)/60s < 1 once x > 59s
		{1 << 40, 0, 30 * s, deniedAt(10, 30*s, 30*s)}, // no overflow
	}
	for i, tt := range tests {
		if got := decideSlidingWindow(tt.prev, tt.curr, tt.elapsed, 1, rule); got != tt.want {
			t.Errorf("step %d: DecideSlidingWindow(%d, %d, %v) = %+v, want %+v", i, tt.prev, tt.curr, tt.elapsed, got, tt.want)
		}
	}
}

const s = time.Second

func allowedAt(limit, remaining int64, reset time.Duration) Decision {
	return Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func deniedAt(limit int64, reset, retry time.Duration) Decision {
	return Decision{Limit: limit, ResetAfter: reset, RetryAfter: retry}
}
