// Package keys is the layout of the stores' keys: where the state of
// each limit lives, one format for every store, so that a live store
// keeps its keys across versions and switches of algorithm. The engine
// names a limit through [ports.Keys]; the composition root hands it a
// [Layout] of the store's prefix and algorithm.
package keys

import (
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Layout is the key layout of one store: its prefix (TOLLGATE_KEY_PREFIX)
// and its algorithm (part of every key but the fixed window's). It is
// the [ports.Keys] the engine names limits through. The zero value is
// the fixed window's layout without a prefix.
type Layout struct {
	Prefix    string
	Algorithm string
}

var _ ports.Keys = Layout{}

// Limit implements [ports.Keys] with [Key]: a rate limit's key takes the
// store's algorithm, a calendar limit's the fixed window's shape (its
// periods' keys are [PeriodKey] of it), a concurrency limit's
// [KeyInFlight].
func (l Layout) Limit(subject domain.TenantID, route, limit string, kind ports.KeyKind) string {
	algorithm := l.Algorithm
	switch {
	case kind == ports.KeyConcurrency:
		algorithm = KeyInFlight // slots, whatever the algorithm
	case kind == ports.KeyCalendar, algorithm == "":
		algorithm = domain.AlgorithmFixedWindow // a calendar quota is a fixed window whatever the algorithm
	}
	return Key(l.Prefix, subject, algorithm, route, limit)
}

// AppendDescriptor implements [ports.Keys] with [AppendDescriptorKey].
func (l Layout) AppendDescriptor(dst []byte, rlsDomain string, window time.Duration, counter []byte) []byte {
	algorithm := l.Algorithm
	if algorithm == "" {
		algorithm = domain.AlgorithmFixedWindow
	}
	return AppendDescriptorKey(dst, l.Prefix, rlsDomain, algorithm, window, counter)
}

// Tenant implements [ports.Keys] with [TenantKeys].
func (l Layout) Tenant(t domain.TenantID) string { return TenantKeys(l.Prefix, t) }

// Period implements [ports.Keys] with [PeriodKey].
func (Layout) Period(base string, start time.Time) string { return PeriodKey(base, start) }

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
// A concurrency limit's keys take [KeyInFlight] for the algorithm,
// whatever the store's algorithm ("<prefix>{acme}:in_flight:<limit>"),
// and a calendar limit's the fixed window's shape.
//
// The tenant is a Redis Cluster hash tag, so every key of one tenant's
// decision lives in one slot. Algorithm names hold '_' and limit names
// never do, and a route's keys have a segment more, so no two
// (algorithm, route, limit) share a key: switching algorithms on a live
// store never meets another algorithm's key. The sliding log's part is
// [KeySlidingLog], not its name. t must be valid (see
// [domain.ParseTenantID]): it holds no '{', '}' or ':'.
func Key(prefix string, t domain.TenantID, algorithm, route, limit string) string {
	algorithm = segment(algorithm)
	var b strings.Builder
	b.Grow(len(prefix) + len(t) + len(algorithm) + len(route) + len(limit) + 12)
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(string(t))
	b.WriteByte('}')
	if algorithm != domain.AlgorithmFixedWindow {
		b.WriteByte(':')
		b.WriteString(algorithm)
	}
	if route != "" {
		b.WriteString(":route:")
		b.WriteString(route)
		b.WriteByte(':')
		b.WriteString(limit)
	} else if limit != domain.DefaultLimit {
		b.WriteByte(':')
		b.WriteString(limit)
	}
	return b.String()
}

// KeySlidingLog is the sliding log's part of a key ([Key],
// [AppendDescriptorKey]): its entries carry their cost, which the logs
// of a unit per member under "sliding_log", an earlier version's, do
// not, so the two never share a key, and replicas of both versions
// during a rolling upgrade each keep a log of their own. It holds '_',
// as algorithm names do and limit names never do.
const KeySlidingLog = "sliding_log_w"

// segment returns algorithm's part of a key.
func segment(algorithm string) string {
	if algorithm == domain.AlgorithmSlidingLog {
		return KeySlidingLog
	}
	return algorithm
}

// TenantKeys returns what every key of tenant t under prefix starts
// with ([Key]): "<prefix>{<t>}". No key of another tenant, nor of an
// address (anonymous traffic metered per address, "{ip:…}") or of a
// descriptor ("{rls:…}"), starts with it: a tenant id holds no '}' and
// no ':'.
func TenantKeys(prefix string, t domain.TenantID) string { return prefix + "{" + string(t) + "}" }

// KeyInFlight is the algorithm part of a concurrency limit's key ([Key]):
// its slots are one kind of state whatever TOLLGATE_ALGORITHM says (on
// Redis a sorted set of leases), so that switching algorithms keeps the
// slots of running requests. It holds '_', as algorithm names do and
// limit names never do: no limit's key of another shape is ever one of
// its keys.
const KeyInFlight = "in_flight"

// AppendDescriptorKey appends to dst the storage key of a counter of
// Envoy's rate limit service: one rate limit descriptor of rlsDomain
// (Envoy's domain), counted per window by algorithm, under prefix:
//
//	<prefix>{rls:<domain>}:<algorithm>:<window>:<counter>
//
// counter is what envoyproxy/ratelimit counts the descriptor under, less
// its domain: each entry's key, '_', value and '_' (rlsconf's
// AppendCounterKey without its leading "<domain>_"), so two descriptors
// share a key exactly when envoyproxy/ratelimit adds their hits to one
// counter in every window: the same entries (or the same pattern, for a
// shared wildcard), in the same domain, with windows of the same length.
// The window is in whole seconds ("60s"), or milliseconds ("1500ms").
//
// The hash tag is the domain, so every key of one request of Envoy's
// (which names one domain) lives in one Redis Cluster slot: one script
// decides the whole request, atomically. '%' and '}' in the domain are
// escaped (%25, %7D), so the tag ends where it should and distinct
// domains never share a key. The tag starts with "rls:", which neither a
// tenant id (no ':') nor an address subject ("ip:…", [domain.AnonymousSubject])
// starts with, so no descriptor key ever is a tenant's or a client's;
// and the algorithm is always there, so no two algorithms share a key.
// It does not allocate when dst has room.
func AppendDescriptorKey(dst []byte, prefix, rlsDomain, algorithm string, window time.Duration, counter []byte) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, "{rls:"...)
	for i := 0; i < len(rlsDomain); i++ {
		switch c := rlsDomain[i]; c {
		case '%':
			dst = append(dst, "%25"...)
		case '}':
			dst = append(dst, "%7D"...)
		default:
			dst = append(dst, c)
		}
	}
	dst = append(dst, "}:"...)
	dst = append(dst, segment(algorithm)...)
	dst = append(dst, ':')
	if window%time.Second == 0 {
		dst = strconv.AppendInt(dst, int64(window/time.Second), 10)
		dst = append(dst, 's')
	} else {
		dst = strconv.AppendInt(dst, int64(window/time.Millisecond), 10)
		dst = append(dst, "ms"...)
	}
	dst = append(dst, ':')
	return append(dst, counter...)
}

// Family returns the family of a key of Envoy's rate limit service
// ([AppendDescriptorKey]) under l's prefix: the key up to the end of its
// first entry's key, that is its domain, algorithm, window and first
// descriptor key without the values, so that a bounded store shares its
// room among descriptors, not among the values clients send (the memory
// store's Options.Family). A '_' inside that entry's key ends the family
// there, as it ends the entry's key in envoyproxy/ratelimit's counter.
// Any other key (a tenant's, a client address's) has none: "".
func (l Layout) Family(key string) string {
	rest, ok := strings.CutPrefix(key, l.Prefix)
	if !ok || !strings.HasPrefix(rest, "{rls:") {
		return ""
	}
	// The domain escapes '}', so the first one ends the tag; the
	// algorithm and the window hold no ':'.
	at := len(key) - len(rest)
	for _, sep := range []string{"}:", ":", ":"} {
		i := strings.Index(key[at:], sep)
		if i < 0 {
			return ""
		}
		at += i + len(sep)
	}
	if i := strings.IndexByte(key[at:], '_'); i >= 0 {
		return key[:at+i+1]
	}
	return key
}

// Reserved returns the key of the reservations in flight of a Reserve
// limit ([domain.Limit.Reserve]) whose key is key (a calendar limit's:
// its base, not a period's): "<key>~reserved", in key's Redis Cluster
// slot. No name holds '~', so no other limit's key is one.
func Reserved(key string) string { return key + "~reserved" }

// PeriodKey returns the key of a calendar limit's period that starts at
// start: base (the limit's [Key] under the fixed window's shape, whatever
// the algorithm) and the start in Unix seconds, "<base>@<seconds>". No
// name holds '@', so no other limit's key is a period's. A finished
// period's key is never read again: the next period has its own.
func PeriodKey(base string, start time.Time) string {
	return string(AppendPeriodKey(nil, base, start))
}

// AppendPeriodKey appends [PeriodKey](base, start) to dst. It does not
// allocate when dst has room.
func AppendPeriodKey(dst []byte, base string, start time.Time) []byte {
	dst = append(dst, base...)
	dst = append(dst, '@')
	return strconv.AppendInt(dst, start.Unix(), 10)
}
