package redis

import (
	"testing"
	"time"
)

func TestWindowMillis(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{0: 1, 1: 1, 1e6: 1, 1e6 + 1: 2, 1.5e6: 2, 60e9: 60000} {
		if got := windowMillis(time.Duration(in)); got != want {
			t.Errorf("windowMillis(%dns) = %d, want %d", in, got, want)
		}
	}
}
