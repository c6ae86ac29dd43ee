package domain

// DefaultLimit is the name of the one limit that applies when no policy
// file names others: TOLLGATE_LIMIT per TOLLGATE_WINDOW.
const DefaultLimit = "default"

// Limit is one budget that applies to a request: its name (as the
// RateLimit headers show it), its rule, and the storage key its state
// lives under (built by [Key]).
type Limit struct {
	Name string
	Rule Rule
	Key  string
	// Shadow reports whether the limit is in shadow mode: it is decided
	// and spent like any other, but its denial does not deny the request
	// (see [Settle] for what it spends).
	Shadow bool
	// Quota reports whether the limit is in quota mode (Envoy's
	// quota_mode): its denial denies the request only when every quota
	// limit of the request denies it. A quota limit also in shadow mode
	// never denies, and so keeps the others from denying together.
	Quota bool
	// Epoch aligns the limit's windows to the Unix epoch: a window starts
	// at a multiple of the rule's window (now − now mod window) instead
	// of with its first request, as envoyproxy/ratelimit's windows do.
	// Fixed window only; the other algorithms ignore it.
	Epoch bool
	// Calendar, when set, makes the limit a calendar quota: Rule.Limit
	// per period of the calendar, counted as a fixed window over the
	// period ([PeriodWindow]) whatever the store's algorithm, on the
	// store's clock (Redis: its server time). Key is then the base of the
	// period's key ([PeriodKey]). Rule.Window is [NominalWindow].
	Calendar *Calendar
	// Concurrency makes the limit a concurrency limit: Rule.Limit
	// requests of the key in flight at once ([DecideSlots]), whatever
	// the store's algorithm and the request's cost. An admitted request
	// takes one slot, which it holds until [Verdict.Release]; a denied
	// one takes none. Rule.Window is [ConcurrencyWindow].
	Concurrency bool
}

// Request is what a limiter decides: one request of Tenant, spending Cost
// units from every limit in Limits. A Request is a value: a limiter reads
// it and never keeps or changes it.
type Request struct {
	// Tenant is the request's tenant ([Unknown] for unresolved traffic).
	Tenant TenantID
	// Route names the route the request matched, [DefaultLimit]'s name
	// "default" without a policy file. Layers that remember a decision
	// (the deny cache) key it by tenant and route.
	Route string
	// Limits are the limits that apply, in the order the headers list
	// them. A limiter decides against every one of them.
	Limits []Limit
	// Cost is what the request spends from each limit, at least 1. A
	// request of cost 0 is not metered, and is never put to a limiter.
	Cost int64
	// Costs, if not nil, holds what each limit spends instead (Costs[i]
	// for Limits[i]; Cost is then ignored), each 0 to [MaxCostUnits]: a
	// limit of cost 0 is decided without spending anything, a check
	// (Envoy's per-descriptor hits_addend). Nil: every limit spends Cost.
	Costs []int64
	// CountOver makes an admitted request spend from every one of its
	// limits, also from a shadow or quota limit that would deny it, as
	// envoyproxy/ratelimit counts every hit of a request it admits.
	// Without it such a limit spends nothing (see [Settle]). It changes
	// nothing for a denied request. Every algorithm honours it.
	CountOver bool
	// CountDenied makes every limit spend Cost whatever the verdict, as
	// a counter that increments before it decides does: a denied request
	// is counted too, and each limit decides on its own (no limit's
	// denial keeps another from counting). It is the fixed window's
	// option (the gateway's one default limit without a policy file, and
	// Envoy's rate limit service for parity); limiters of the other
	// algorithms ignore it.
	CountDenied bool
	// NoCache keeps the request from the layers that answer from memory
	// (the deny cache): it reaches the limiter every time. Envoy's rate
	// limit service sets it with envoyproxy/ratelimit's counting
	// (CountDenied), where each denied hit is an increment that a later
	// request may read through another limit on the same counter.
	NoCache bool
	// PolicyKeys says the request's keys are a policy's for one tenant
	// (the engine's HTTP decisions): a tenant has at most one key per
	// limit of the policy, so a bounded store that already holds one of
	// the request's keys may add the others. Without it (Envoy's
	// descriptors, whose values are the client's) a full store adds none.
	PolicyKeys bool
	// Decisions, if its capacity holds one Decision per limit, is where
	// the limiter writes the verdict's Decisions instead of allocating
	// them ([Settle]): the verdict's Decisions then share its array.
	// A caller that provides it owns that array for as long as it reads
	// the verdict, and gives each request its own; a layer that keeps a
	// verdict past its request copies the Decisions. Nil: the limiter
	// allocates them.
	Decisions []Decision
}

// MaxCostUnits bounds what one limit of a request may spend
// ([Request.Costs]): above any limit (and any Envoy requests_per_unit,
// a uint32), so a larger cost is denied all the same, and far from
// overflowing a count.
const MaxCostUnits = 1 << 32

// CostOf returns what limit i of r spends: Costs[i], or Cost.
func (r Request) CostOf(i int) int64 {
	if r.Costs != nil {
		return r.Costs[i]
	}
	return r.Cost
}

// ahead returns what the limits of r before i that share limit i's key
// spend: a key's limits are decided in order, each after the costs of
// the ones before it, as one counter that several limits increment.
func (r Request) ahead(i int) int64 {
	var sum int64
	key := r.Limits[i].Key
	for j := range i {
		if r.Limits[j].Key == key {
			sum += r.CostOf(j)
		}
	}
	return sum
}
