package redis

import (
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
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
		"redis://h:6379/0?max_retries=-1":          true,
		"redis://h:6379/0?max_retries=0":           false, // go-redis: 0 is its default, 3
		"redis://h:6379/0?max_retries=2":           false,
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

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	const timeout = 40 * time.Millisecond
	c, err := Open("redis://:pw@redis:6379/2", ClientOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.rdb.(*goredis.Client).Options()
	if !o.ContextTimeoutEnabled {
		t.Error("ContextTimeoutEnabled = false: deadlines would be ignored")
	}
	if o.MaxRetries != 0 { // -1 normalised: no retry, so no double-counted INCR
		t.Errorf("MaxRetries = %d, want 0 after normalisation of -1", o.MaxRetries)
	}
	if o.ReadTimeout != 2*timeout || o.WriteTimeout != 2*timeout {
		t.Errorf("Read/WriteTimeout = %v/%v, want %v", o.ReadTimeout, o.WriteTimeout, 2*timeout)
	}
	if o.DialTimeout < timeout || o.PoolSize < 64 || o.MinIdleConns != 0 {
		t.Errorf("DialTimeout %v, PoolSize %d, MinIdleConns %d: want >= timeout, >= 64, 0 (no background dials during a stall)",
			o.DialTimeout, o.PoolSize, o.MinIdleConns)
	}
	if o.Password != "pw" || o.DB != 2 {
		t.Errorf("password/db from the URL not applied: %q/%d", o.Password, o.DB)
	}
	// Settings in the URL's query win, but for retries.
	c2, err := Open("redis://redis:6379/0?pool_size=7&max_retries=-1", ClientOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.rdb.(*goredis.Client).Options(); o.PoolSize != 7 || o.MaxRetries != 0 {
		t.Errorf("URL pool_size=7&max_retries=-1: got %d, %d", o.PoolSize, o.MaxRetries)
	}
	if _, err := Open("redis://h:6379/0?max_retries=3", ClientOptions{}); err == nil {
		t.Error("Open with max_retries=3: no error (a retried batch counts twice)")
	}
	if _, err := Open("redis://h:6379/0?dial_timeout=-1s", ClientOptions{}); err == nil {
		t.Error("Open with a negative dial_timeout: no error")
	}
}
