package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

func TestValidateClusterURL(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"redis://a:7000":   true,
		"redis://a:7000/":  true,
		"redis://a:7000/0": true,
		"rediss://u:pass@a:7000?addr=b:7001&addr=c:7002":    true,
		"redis://a:7000?addr=[::1]:7001":                    true,
		"redis://a:7000?max_redirects=8&read_timeout=100ms": true,
		"redis://a:7000/1":                                  false, // a cluster has only db 0
		"unix:///run/redis.sock":                            false,
		"redis://:7000":                                     false,
		"redis://a:0":                                       false,
		"redis://a:7000?addr=b":                             false,
		"redis://a:7000?addr=b:70000":                       false,
		"redis://a:7000?addr=:7001":                         false,
		"redis://a:7000?read_timeout=-1s":                   false,
		"redis://a:7000?db=1":                               false, // not a cluster option
		"redis://s3cret@a:7000?addr=b":                      false,
		// A seed has no user-info of its own (the URL's is every
		// node's), and the error must not repeat one.
		"redis://u:pw@a:7000?addr=u:s3cret@b:7001": false,
		"redis://a:7000?addr=s3cret@b:7001":        false,
		"redis://a:7000?addr=u:s3cret@b:7001/0":    false,
	} {
		err := ValidateClusterURL(url)
		if (err == nil) != ok {
			t.Errorf("ValidateClusterURL(%q) = %v, want ok=%v", url, err, ok)
		}
		if err != nil && containsAny(err.Error(), "s3cret", "pass") {
			t.Errorf("ValidateClusterURL(%q) = %q: the error repeats a secret", url, err)
		}
	}
	// A seed list is not a single Redis's URL.
	if err := ValidateURL("redis://a:7000?addr=b:7001"); err == nil {
		t.Error("ValidateURL accepts a seed list")
	}
}

func TestTLSUnverified(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"rediss://a:6380?skip_verify=true":  true,
		"rediss://a:6380?skip_verify=false": false,
		"rediss://a:6380":                   false,
		"rediss://a:7000?addr=b:7001":       false,
	} {
		c, err := Open(url, Options{Cluster: strings.Contains(url, "addr=")})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.TLSUnverified(); got != want {
			t.Errorf("Open(%q).TLSUnverified() = %v, want %v", url, got, want)
		}
		c.Close()
	}
}

func TestOpenCluster(t *testing.T) {
	t.Parallel()
	const timeout = 40 * time.Millisecond
	c, err := Open("redis://:pw@a:7000?addr=b:7001&addr=c:7002", Options{Timeout: timeout, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.rdb.(*goredis.ClusterClient)
	if !ok {
		t.Fatalf("Open in cluster mode: %T, want a *goredis.ClusterClient", c.rdb)
	}
	o := cc.Options()
	if got := strings.Join(o.Addrs, ","); got != "a:7000,b:7001,c:7002" {
		t.Errorf("seeds = %s, want a:7000,b:7001,c:7002", got)
	}
	if !o.ContextTimeoutEnabled || o.Password != "pw" {
		t.Errorf("options not applied: %+v", o)
	}
	// Decisions are bounded by their context; a background reload of the
	// slot map by the per-call timeouts, which a loaded machine must meet.
	if o.ReadTimeout != reloadTimeout || o.WriteTimeout != reloadTimeout {
		t.Errorf("Read/WriteTimeout = %v/%v, want %v", o.ReadTimeout, o.WriteTimeout, reloadTimeout)
	}
	if o.MaxRedirects < 2 {
		t.Errorf("MaxRedirects = %d: an ASK during a migration needs redirects", o.MaxRedirects)
	}
	// go-redis's own reload after a failover waits for this interval
	// (redis/go-redis#3979); errors prompt one sooner, this bounds the rest.
	if o.ClusterStateReloadInterval > 5*time.Second {
		t.Errorf("ClusterStateReloadInterval = %v, want at most the 5 s failover bound", o.ClusterStateReloadInterval)
	}
	if o.PoolSize < 64 || o.FailingTimeoutSeconds > 5 {
		t.Errorf("PoolSize %d, FailingTimeoutSeconds %d", o.PoolSize, o.FailingTimeoutSeconds)
	}
	c2, err := Open("redis://a:7000?pool_size=7", Options{Timeout: timeout, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.rdb.(*goredis.ClusterClient).Options(); o.PoolSize != 7 {
		t.Errorf("URL pool_size=7: got %d", o.PoolSize)
	}
	if _, err := Open("redis://a:7000/0", Options{}); err != nil {
		t.Errorf("a plain URL in single mode: %v", err)
	}
	if _, err := Open("unix:///run/redis.sock", Options{Cluster: true}); err == nil {
		t.Error("Open of a unix socket in cluster mode: no error")
	}
}

func TestTopologyError(t *testing.T) {
	t.Parallel()
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{goredis.Nil, false},
		{context.Canceled, false},
		{fmt.Errorf("redis: ping: %w", context.Canceled), false},
		{netErr, true},
		{context.DeadlineExceeded, true},
		{io.EOF, true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("MASTERDOWN Link with MASTER is down"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("NOSCRIPT No matching script"), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{replyError("MOVED 3999 127.0.0.1:6381"), false}, // go-redis follows and reloads itself
	} {
		if got := topologyError(tt.err); got != tt.want {
			t.Errorf("topologyError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// replyError is an error reply from Redis, as go-redis types them.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	const timeout = 40 * time.Millisecond
	c, err := Open("redis://:pw@redis:6379/2", Options{Timeout: timeout})
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
	if o.ReadTimeout != hardWait(timeout) || o.WriteTimeout != hardWait(timeout) {
		t.Errorf("Read/WriteTimeout = %v/%v, want %v (the coalescer's hard bound)", o.ReadTimeout, o.WriteTimeout, hardWait(timeout))
	}
	if o.DialTimeout < timeout || o.PoolSize < 64 || o.MinIdleConns != 0 {
		t.Errorf("DialTimeout %v, PoolSize %d, MinIdleConns %d: want >= timeout, >= 64, 0 (no background dials during a stall)",
			o.DialTimeout, o.PoolSize, o.MinIdleConns)
	}
	if o.Password != "pw" || o.DB != 2 {
		t.Errorf("password/db from the URL not applied: %q/%d", o.Password, o.DB)
	}
	// Settings in the URL's query win, but for retries.
	c2, err := Open("redis://redis:6379/0?pool_size=7&max_retries=-1", Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.rdb.(*goredis.Client).Options(); o.PoolSize != 7 || o.MaxRetries != 0 {
		t.Errorf("URL pool_size=7&max_retries=-1: got %d, %d", o.PoolSize, o.MaxRetries)
	}
	if _, err := Open("redis://h:6379/0?max_retries=3", Options{}); err == nil {
		t.Error("Open with max_retries=3: no error (a retried batch counts twice)")
	}
	if _, err := Open("redis://h:6379/0?dial_timeout=-1s", Options{}); err == nil {
		t.Error("Open with a negative dial_timeout: no error")
	}
}
