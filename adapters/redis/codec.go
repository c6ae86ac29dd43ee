package redis

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
)

// The layout of a limiter script's KEYS and ARGV, declared once, here.
// The Lua scripts read ARGV only through the names of [layout] (the
// blocks between "-- layout:" and "-- end of layout" in lua/prelude.lua
// and each lua/<algorithm>.lua), which TestLayout holds equal to it.
//
//	KEYS[i]          limit i's key (a calendar limit's: its current period's), i = 1..n
//	KEYS[n+2j-1..]   the j-th calendar limit's previous and next periods' keys
//	after them       each Reserve limit's reservations in flight (keys.Reserved)
//	ARGV[A_*]        the script-wide arguments (header)
//	ARGV[A_LIMITS + (i-1)*stride + L_*]   limit i's arguments
//	after them       the holders to remove first, which slot limits point at;
//	                 in a settlement, each limit's mark and what it spent
//
// Script-wide arguments, the same for every limit of a call.
const (
	argMode    = iota + 1  // the counting mode ([mode]), or a peek
	argAligned             // "1": fixed windows aligned to the epoch, "0" not
	argKinds               // one byte per limit: [kindRule], [kindCalendar], [kindSlot]
	argFlags               // one byte per limit: '0' enforced, '1' shadow, '2' quota, '3' both; 4 more for a Reserve limit
	argStride              // the arguments each limit has
	argLimits  = argStride // limit i's k-th argument is ARGV[argLimits + (i-1)*stride + k]
)

// Every limit's first arguments, whatever its kind.
const (
	limCost  = iota + 1 // the units this request spends from the limit (0: a check)
	limLimit            // the rule's limit, or a concurrency limit's slots
	limKind             // the first argument of the limit's kind
)

// A calendar limit's arguments after limLimit: the periods around the
// replica's clock, in ms since the epoch (Redis's clock picks one).
const (
	calPrev = iota + limKind // the previous period's start
	calCur                   // the current period's start
	calNext                  // the next period's start
	calEnd                   // the next period's end
	calLast = calEnd
)

// A concurrency limit's arguments after limLimit.
const (
	slotLease  = iota + limKind // the lease, ms
	slotHolder                  // the request's holder, "<replica>:<request>"
	slotFirst                   // the ARGV index of the first holder to remove first (0: none)
	slotCount                   // how many holders to remove first
	slotLast   = slotCount
)

// Each algorithm's rule arguments after limLimit (kind 'r').
const (
	fixedWindowMs = limKind // the window, ms

	logWindowUs = limKind     // the window, µs
	logTTLMs    = limKind + 1 // the key's TTL, ms (the window, rounded up)

	slidingWindowUs = limKind // the window, µs

	bucketIntervalNs = limKind     // the emission interval, ns (domain.TokenInterval)
	bucketWindowUs   = limKind + 1 // the window, µs
)

// A limit's kind, ARGV[A_KINDS]'s byte for it.
const (
	kindRule     = 'r' // the algorithm's rule (the script's body)
	kindCalendar = 'c' // a fixed window over a calendar period
	kindSlot     = 'n' // a concurrency limit: slots held as leases
)

// mode is ARGV[A_MODE]: how a call counts, or a peek.
type mode byte

const (
	countAdmitted mode = '0' // spend only on an admitted request, from the limits that admit it
	countDenied   mode = '1' // spend on a denied request too (fixed window only)
	countOver     mode = '2' // an admitted request spends from every limit, one that denies too
	countBoth     mode = '3' // countDenied and countOver
	modePeek      mode = 'p' // decide every limit at cost 0 and write nothing
	modeSettle    mode = 's' // settle every limit (each a Reserve limit): spend its cost more at its mark
)

// counting returns the mode of a decision: denials counted when asked
// and the script honours it, every limit of an admitted request when asked.
func counting(denied, over bool) mode {
	return countAdmitted + mode(b2i(denied)+2*b2i(over))
}

// layout is every name the Lua scripts read the arguments by, and its
// value: lua/prelude.lua declares the common ones, each body its own.
// Lua indices are 1-based, as the constants above.
type layoutName struct {
	name  string
	value int
}

var commonLayout = []layoutName{
	{"A_MODE", argMode}, {"A_ALIGNED", argAligned}, {"A_KINDS", argKinds}, {"A_FLAGS", argFlags},
	{"A_STRIDE", argStride}, {"A_LIMITS", argLimits},
	{"L_COST", limCost}, {"L_LIMIT", limLimit},
	{"L_CAL_PREV", calPrev}, {"L_CAL_CUR", calCur}, {"L_CAL_NEXT", calNext}, {"L_CAL_END", calEnd},
	{"L_SLOT_LEASE", slotLease}, {"L_SLOT_HOLDER", slotHolder}, {"L_SLOT_FIRST", slotFirst}, {"L_SLOT_COUNT", slotCount},
}

// layoutLua returns the Lua block that declares names.
func layoutLua(names []layoutName) string {
	var sb strings.Builder
	sb.WriteString("-- layout: generated from adapters/redis/codec.go (TestLayout)\n")
	for _, n := range names {
		fmt.Fprintf(&sb, "local %s = %d\n", n.name, n.value)
	}
	sb.WriteString("-- end of layout\n")
	return sb.String()
}

// ruleArgs writes a limit's rule arguments (kind 'r') at base, the
// index in b.a of its first argument.
type ruleArgs func(b *args, base int, r domain.Rule)

// shape is what a request needs of a call: its stride, calendar limits
// and slots.
type shape struct {
	stride    int
	calendars int
	reserves  int
	slots     bool
}

// shapeOf returns req's shape on sp.
func shapeOf(req domain.Request, sp *spec) shape {
	s := shape{stride: limKind - 1 + sp.ruleArgs}
	for _, lim := range req.Limits {
		if lim.Reserve {
			s.reserves++
		}
		switch {
		case lim.Concurrency:
			s.slots = true
			s.stride = max(s.stride, slotLast)
		case lim.Calendar != nil:
			s.calendars++
			s.stride = max(s.stride, calLast)
		}
	}
	if s.reserves > 0 {
		s.stride++ // a Reserve limit's least, its last argument
	}
	return s
}

// call is one decision's script call being encoded.
type call struct {
	req     domain.Request
	spec    *spec
	shape   shape
	mode    mode
	aligned bool          // fixed windows start at the epoch
	holder  string        // the request's slots' holder ("": takes none)
	leases  *fleet.Leases // the slots' leases, with a holder
	now     time.Time     // the replica's clock, for calendar periods
	// adm and used are a settlement's: the admission's decisions, one
	// per limit, and the units used.
	adm  []domain.Decision
	used int64
}

// encode returns the arguments of c's EVALSHA (numkeys, KEYS, ARGV) in
// a builder from the pool (putArgs).
func (c *call) encode() *args {
	n, sh := len(c.req.Limits), c.shape
	keys := n + 2*sh.calendars + sh.reserves
	b := getArgs(3+keys+argLimits+sh.stride*n+2*n, sh.stride*n+2*n, keys+2)
	b.a = c.spec.script.AppendCall(b.a, keys)
	var pbuf [4]*periods
	pers := c.keys(b, pbuf[:0])
	c.header(b, c.aligned)
	// The holders to remove first come after every limit's arguments.
	first := len(b.a) - 3 - keys + sh.stride*n + 1 // their first ARGV index
	var released []string
	for i, lim := range c.req.Limits {
		base := len(b.a)
		for range sh.stride {
			b.a = append(b.a, zeroArg)
		}
		b.put(base, limCost, c.cost(i))
		b.put(base, limLimit, lim.Rule.Limit)
		if lim.Reserve {
			b.put(base, sh.stride, max(lim.Least, 1))
		}
		switch kindOf(lim) {
		case kindSlot:
			released = c.slot(b, base, lim, first, released)
		case kindCalendar:
			copy(b.a[base+calPrev-1:], pers[0].args[:])
			pers = pers[1:]
		default:
			c.spec.args(b, base, lim.Rule)
		}
	}
	for _, h := range released {
		b.str(h)
	}
	if c.mode == modeSettle {
		for i := range c.req.Limits {
			b.int(c.adm[i].Mark)
			b.int(c.adm[i].Spent)
		}
	}
	return b
}

// keys appends KEYS: each limit's (a calendar limit's current period's),
// then each calendar limit's previous and next periods'. It returns the
// calendar limits' periods, in order, appended to pers.
func (c *call) keys(b *args, pers []*periods) []*periods {
	var nbuf [8]string
	neighbours := nbuf[:0]
	for _, lim := range c.req.Limits {
		if lim.Calendar == nil {
			b.str(lim.Key)
			continue
		}
		p := periodsAround(*lim.Calendar, c.now)
		prev, cur, next := p.keys(lim.Key)
		pers = append(pers, p)
		neighbours = append(neighbours, prev, next)
		b.str(cur)
	}
	for _, k := range neighbours {
		b.str(k)
	}
	if c.shape.reserves > 0 {
		for _, lim := range c.req.Limits {
			if lim.Reserve {
				b.str(keys.Reserved(lim.Key))
			}
		}
	}
	return pers
}

// header appends the script-wide arguments, in the order of their
// constants.
func (c *call) header(b *args, aligned bool) {
	b.a = append(b.a, modeArgs[c.mode], alignedArgs[b2i(aligned)])
	start := len(b.buf)
	for _, lim := range c.req.Limits {
		b.buf = append(b.buf, kindOf(lim))
	}
	b.rawFrom(start)
	start = len(b.buf)
	for _, lim := range c.req.Limits {
		b.buf = append(b.buf, '0'+b2i(lim.Shadow)+2*b2i(lim.Quota)+4*b2i(lim.Reserve))
	}
	b.rawFrom(start)
	b.int(int64(c.shape.stride))
}

// slot writes a concurrency limit's arguments at base: none in a peek,
// which takes no slot; else the lease, the holder, and the holders of
// the key to remove first, which it appends to released (the first of
// them at ARGV index first).
func (c *call) slot(b *args, base int, lim domain.Limit, first int, released []string) []string {
	if c.holder == "" {
		return released
	}
	b.put(base, slotLease, c.leases.Lease().Milliseconds())
	b.setStr(base+slotHolder-1, c.holder)
	if hs := c.leases.Released(lim.Key); len(hs) > 0 {
		b.put(base, slotFirst, int64(first+len(released)))
		b.put(base, slotCount, int64(len(hs)))
		released = append(released, hs...)
	}
	return released
}

// cost returns what the request spends from limit i.
func (c *call) cost(i int) int64 {
	switch {
	case c.mode == modePeek:
		return 0
	case c.mode == modeSettle:
		return c.used - c.adm[i].Spent
	}
	return c.req.Limits[i].Cost
}

// kindOf returns lim's kind.
func kindOf(lim domain.Limit) byte {
	switch {
	case lim.Concurrency:
		return kindSlot
	case lim.Calendar != nil:
		return kindCalendar
	}
	return kindRule
}

// Header values, boxed once.
var (
	modeArgs    = [...]any{countAdmitted: "0", countDenied: "1", countOver: "2", countBoth: "3", modePeek: "p", modeSettle: "s"}
	alignedArgs = [2]any{"0", "1"}
	zeroArg     = any(int64(0))
)
