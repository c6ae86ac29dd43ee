package domain

// DefaultLimit is the name of the one limit that applies when no policy
// file names others: TOLLGATE_LIMIT per TOLLGATE_WINDOW.
const DefaultLimit = "default"

// Limit is one budget that applies to a request: its name (as the
// RateLimit headers show it), its rule, the storage key its state lives
// under, and what the request spends from it.
type Limit struct {
	Name string
	Rule Rule
	Key  string
	// Cost is what the request spends from the limit, 0 to
	// [MaxCostUnits]: a limit of cost 0 is decided without spending
	// anything, a check (Envoy's per-descriptor hits_addend).
	Cost int64
	// Shadow reports whether the limit is in shadow mode: it is decided
	// and spent like any other, but its denial does not deny the request
	// (see [Settle] for what it spends).
	Shadow bool
	// Quota reports whether the limit is in quota mode (Envoy's
	// quota_mode): its denial denies the request only when every quota
	// limit of the request denies it. A quota limit also in shadow mode
	// never denies, and so keeps the others from denying together.
	Quota bool
	// Calendar, when set, makes the limit a calendar quota: Rule.Limit
	// per period of the calendar, counted as a fixed window over the
	// period ([PeriodWindow]) whatever the store's algorithm, on the
	// store's clock. Key is then the base of the period's keys.
	// Rule.Window is [NominalWindow].
	Calendar *Calendar
	// Concurrency makes the limit a concurrency limit: Rule.Limit
	// requests of the key in flight at once ([DecideSlots]), whatever
	// the store's algorithm and the request's cost. An admitted request
	// takes one slot, which it holds until [Verdict.Release]; a denied
	// one takes none. Rule.Window is [ConcurrencyWindow].
	Concurrency bool
	// Reserve makes Cost a reservation of units the request's answer
	// reports only when it ends (a token limit): the limit admits while
	// it has anything left, and spends Cost, or what remains when that
	// is less ([Decision.Spent]). A settlement later
	// replaces what was spent with what was used. Cost is then at least 1.
	Reserve bool
	// Least is, for a Reserve limit, the smallest spend that serves the
	// request (an answer's prompt and one unit more): the limit admits
	// only while at least that much remains. 0 means 1.
	Least int64
}

// Request is what a limiter decides: one request of Tenant on Route,
// spending each limit's Cost from it. It holds what the policy decides
// and nothing else: how a store counts is the store's option. A Request
// is a value: a limiter reads it and never keeps or changes it.
type Request struct {
	// Tenant is the request's subject: its tenant ([Unknown] for
	// unresolved traffic), or what a face meters it as instead (a
	// client's address, a planned request's first counter).
	Tenant TenantID
	// Route names the route the request matched, [DefaultLimit]'s name
	// "default" without a policy file. Tenant and Route together name
	// what a decision is about, for whoever remembers one.
	Route string
	// Limits are the limits that apply, in the order the headers list
	// them. A limiter decides against every one of them.
	Limits []Limit
}

// Counting is how a limiter counts a request's limits: which of them
// spend their cost, given the verdict ([Spends]). It is a limiter's
// option, set where the limiter is built; a limiter that cannot honour a
// mode refuses to be built with it. The zero value is [CountAdmitted].
type Counting uint8

// Counting modes.
const (
	// CountAdmitted is all or nothing: an admitted request spends from
	// every limit that admits it, a denied one from none.
	CountAdmitted Counting = iota
	// CountHits makes an admitted request spend from every one of its
	// limits, also from a shadow or quota limit that would deny it, as
	// envoyproxy/ratelimit counts every hit of a request it admits. A
	// denied request spends nothing. Every algorithm honours it.
	CountHits
	// CountEvery makes every limit spend whatever the verdict, as a
	// counter that increments before it decides: a denied request is
	// counted too, and each limit decides on its own (no limit's denial
	// keeps another from counting); an admitted one counts as with
	// CountHits. The fixed window honours it, no other algorithm.
	CountEvery
)

var countingNames = [...]string{"admitted", "hits", "every"}

// String returns the mode's name: "admitted", "hits" or "every".
func (c Counting) String() string {
	if int(c) < len(countingNames) {
		return countingNames[c]
	}
	return "unknown"
}

// HonouredBy reports whether algorithm can count by c: every algorithm
// counts admitted requests and hits, only the fixed window every request.
func (c Counting) HonouredBy(algorithm string) bool {
	return c < CountEvery || (c == CountEvery && algorithm == AlgorithmFixedWindow)
}

// Windows is where a limiter's windows start: a limiter's option, set
// where it is built. The zero value is [WindowsFromFirst].
type Windows uint8

// Windows.
const (
	// WindowsFromFirst starts a fixed window with its first request.
	WindowsFromFirst Windows = iota
	// WindowsEpoch aligns fixed windows to the Unix epoch: a window is
	// the multiple of the rule's window that holds now (now − now mod
	// window), as envoyproxy/ratelimit's windows are. The sliding window
	// is aligned so under either value; the token bucket and the sliding
	// log have no windows to align.
	WindowsEpoch
)

// MaxCostUnits bounds what one limit of a request may spend
// ([Limit.Cost]): above any limit (and any Envoy requests_per_unit,
// a uint32), so a larger cost is denied all the same, and far from
// overflowing a count.
const MaxCostUnits = 1 << 32

// ahead returns what the limits of r before i that share limit i's key
// spend: a key's limits are decided in order, each after the costs of
// the ones before it, as one counter that several limits increment.
func (r Request) ahead(i int) int64 {
	var sum int64
	key := r.Limits[i].Key
	for j := range i {
		if r.Limits[j].Key == key {
			sum += r.Limits[j].Cost
		}
	}
	return sum
}
