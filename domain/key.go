package domain

import (
	"strconv"
	"strings"
	"time"
)

// Key returns the storage key of tenant t's limit named limit, on route
// (empty for a global limit), under algorithm, with prefix in front. It
// is the one place that builds keys:
//
//	<prefix>{<tenant>}                           fixed window, global limit "default"
//	<prefix>{<tenant>}:<limit>                   fixed window, another global limit
//	<prefix>{<tenant>}:<algorithm>               another algorithm, limit "default"
//	<prefix>{<tenant>}:<algorithm>:<limit>       another algorithm, another limit
//	<prefix>{<tenant>}[:<algorithm>]:route:<route>:<limit>   a route's own limit
//
// The tenant is a Redis Cluster hash tag, so every key of one tenant's
// decision lives in one slot. Algorithm names hold '_' and limit names
// never do, and a route's keys have a segment more, so no two
// (algorithm, route, limit) share a key: switching algorithms on a live
// store never meets another algorithm's key. t must be valid (see
// [ParseTenantID]): it holds no '{', '}' or ':'.
func Key(prefix string, t TenantID, algorithm, route, limit string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(t) + len(algorithm) + len(route) + len(limit) + 12)
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(string(t))
	b.WriteByte('}')
	if algorithm != AlgorithmFixedWindow {
		b.WriteByte(':')
		b.WriteString(algorithm)
	}
	if route != "" {
		b.WriteString(":route:")
		b.WriteString(route)
		b.WriteByte(':')
		b.WriteString(limit)
	} else if limit != DefaultLimit {
		b.WriteByte(':')
		b.WriteString(limit)
	}
	return b.String()
}

// PeriodKey returns the key of a calendar limit's period that starts at
// start: base (the limit's [Key] under the fixed window's shape, whatever
// the algorithm) and the start in Unix seconds, "<base>@<seconds>". No
// name holds '@', so no other limit's key is a period's. A finished
// period's key is never read again: the next period has its own.
func PeriodKey(base string, start time.Time) string {
	return base + "@" + strconv.FormatInt(start.Unix(), 10)
}
