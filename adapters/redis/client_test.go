package redis

import (
	"strings"
	"testing"
	"time"
)

// The stores run against a real Redis in integration/; these are the
// client's pure parts.

func TestServerVersion(t *testing.T) {
	t.Parallel()
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if got, err := serverVersion(info); err != nil || got != "7.0.15" {
		t.Errorf("serverVersion = %q, %v; want 7.0.15", got, err)
	}
	if _, err := serverVersion("# Server\r\nuptime_in_seconds:3\r\n"); err == nil {
		t.Error("serverVersion without redis_version: no error")
	}
}

func TestValidateURL(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"redis://localhost:6379/0":                 true,
		"rediss://user:pass@host:6380/1":           true,
		"unix:///run/redis.sock":                   true,
		"redis://h:6379/0?dial_timeout=2s":         true,
		"redis://h:6379/0?dial_timeout=-1s":        false,
		"redis://h:6379/0?read_timeout=-1":         false,
		"redis://h:6379/0?pool_timeout=x":          false,
		"redis://h:6379/0?no_such_option=1":        false,
		"redis://h:0/0":                            false,
		"redis://h:70000/0":                        false,
		"redis://:6379/0":                          false,
		"http://h:6379":                            false,
		"unix://":                                  false,
		"redis://s3cret@h:6379/0?dial_timeout=-1s": false,
	} {
		err := ValidateURL(url)
		if (err == nil) != ok {
			t.Errorf("ValidateURL(%q) = %v, want ok=%v", url, err, ok)
		}
		if err != nil && (containsAny(err.Error(), "s3cret", "pass")) {
			t.Errorf("ValidateURL(%q) = %q: the error repeats a secret", url, err)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestWindowMillis(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{0: 1, 1: 1, 1e6: 1, 1e6 + 1: 2, 1.5e6: 2, 60e9: 60000} {
		if got := windowMillis(durationNS(in)); got != want {
			t.Errorf("windowMillis(%dns) = %d, want %d", in, got, want)
		}
	}
}

func durationNS(n int64) time.Duration { return time.Duration(n) }
