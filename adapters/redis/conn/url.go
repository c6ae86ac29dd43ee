package conn

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// durationParams are the URL query parameters go-redis reads as
// durations. A negative one would mean "no timeout" to go-redis, which a
// gateway must not run with: ValidateURL rejects it.
var durationParams = []string{"dial_timeout", "read_timeout", "write_timeout", "pool_timeout", "conn_max_idle_time", "conn_max_lifetime"}

// ValidateURL reports whether s is a URL [Open] accepts: redis://,
// rediss:// or unix://, a host and a port in range, only options go-redis
// knows, no negative timeout, and no max_retries but -1 (none). The error never holds the URL, which
// may carry a password.
func ValidateURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("redis: the URL does not parse")
	}
	switch u.Scheme {
	case "redis", "rediss":
		if err := validatePort(u.Port()); err != nil {
			return err
		}
		if u.Hostname() == "" {
			return errors.New("redis: no host")
		}
	case "unix":
		if u.Path == "" {
			return errors.New("redis: no socket path")
		}
	default:
		return fmt.Errorf("redis: scheme %q, want redis, rediss or unix", u.Scheme)
	}
	if err := validateDurations(u.Query()); err != nil {
		return err
	}
	if err := validateRetries(u.Query()); err != nil {
		return err
	}
	if _, err := goredis.ParseURL(s); err != nil {
		// go-redis's errors name the option, never the password.
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// validatePort reports whether p, a URL's port, is empty (the default)
// or in 1..65535.
func validatePort(p string) error {
	if p == "" {
		return nil
	}
	if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("redis: port %q out of range", p)
	}
	return nil
}

// validateDurations reports whether every duration option in q parses
// and is at least 0.
func validateDurations(q url.Values) error {
	for _, name := range durationParams {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		d, err := time.ParseDuration(v)
		if err != nil {
			// go-redis also takes whole seconds.
			var n int64
			if n, err = strconv.ParseInt(v, 10, 64); err == nil {
				d = time.Duration(n) * time.Second
			}
		}
		if err != nil || d < 0 {
			return fmt.Errorf("redis: %s=%q, want a duration of at least 0", name, v)
		}
	}
	return nil
}

// validateRetries refuses a max_retries in q that would retry: a retried
// script that had run counts a request twice, a retried batch a whole
// batch twice.
func validateRetries(q url.Values) error {
	if q.Has("max_retries") && q.Get("max_retries") != "-1" {
		return fmt.Errorf("redis: max_retries=%q: tollgate never retries a decision (a retried script that ran counts twice); leave it out", q.Get("max_retries"))
	}
	return nil
}

// ValidateClusterURL reports whether s is a seed list [Open] accepts in
// cluster mode: redis:// or rediss://, a host and port, optionally more
// seeds as addr=host:port query parameters (one seed is enough: the rest
// of the cluster is discovered; no user-info of their own), database 0 or none (a cluster has only
// database 0), only options go-redis's cluster client knows, and no
// negative timeout. The error never holds the URL.
func ValidateClusterURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("redis: the URL does not parse")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("redis: scheme %q, want redis or rediss for a cluster", u.Scheme)
	}
	if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
		return fmt.Errorf("redis: database %q: a cluster has only database 0", db)
	}
	if err := validatePort(u.Port()); err != nil {
		return err
	}
	if u.Hostname() == "" {
		return errors.New("redis: no host")
	}
	if err := validateDurations(u.Query()); err != nil {
		return err
	}
	for i, a := range u.Query()["addr"] {
		if strings.Contains(a, "@") {
			// go-redis would dial "user:secret@host" as a host name, and
			// its errors (and any log of them) would show the secret.
			return fmt.Errorf("redis: addr= seed number %d has user-info: every node takes the URL's credentials; give the seed as host:port", i+1)
		}
		seed, err := url.Parse("redis://" + a)
		if err != nil || seed.Hostname() == "" || seed.Port() == "" || seed.Path != "" {
			return fmt.Errorf("redis: seed addr=%q, want host:port", a)
		}
		if err := validatePort(seed.Port()); err != nil {
			return err
		}
	}
	if _, err := goredis.ParseClusterURL(s); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// queryHas reports whether rawURL, a URL that parses, sets option name.
func queryHas(rawURL, name string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has(name)
}
