package rlsconf

import "strings"

// Unit is the period of a rule. The values are those of Envoy's
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit enum (WEEK came
// last, hence 7), so a face converts with a plain cast. The zero value,
// UnitUnknown, is the unit of an unlimited rule.
type Unit uint8

// The units envoyproxy/ratelimit accepts.
const (
	UnitUnknown Unit = iota
	Second
	Minute
	Hour
	Day
	Month
	Year
	Week
)

// unitNames maps the upper-case spelling of a unit to it, as the proto
// enum's name table does; UNKNOWN is absent because it is rejected.
var unitNames = map[string]Unit{
	"SECOND": Second,
	"MINUTE": Minute,
	"HOUR":   Hour,
	"DAY":    Day,
	"WEEK":   Week,
	"MONTH":  Month,
	"YEAR":   Year,
}

// parseUnit reads a unit the way envoyproxy/ratelimit does: strings.ToUpper,
// then the enum's name table (so "Minute", "MINUTE" and even "ſecond", whose
// long s upper-cases to S, are valid).
func parseUnit(s string) (Unit, bool) {
	u, ok := unitNames[strings.ToUpper(s)]
	return u, ok
}

// Seconds returns the unit's length: 1, 60, 3600, 86400, 604800, then
// 2592000 for Month (30 days) and 31536000 for Year (365 days), the
// lengths envoyproxy/ratelimit divides unix time by to align its windows to
// the epoch. It returns 0 for UnitUnknown and any other value.
func (u Unit) Seconds() int64 {
	switch u {
	case Second:
		return 1
	case Minute:
		return 60
	case Hour:
		return 3600
	case Day:
		return 86400
	case Week:
		return 7 * 86400
	case Month:
		return 30 * 86400
	case Year:
		return 365 * 86400
	}
	return 0
}

// String returns the proto enum name: "SECOND" … "WEEK", or "UNKNOWN".
func (u Unit) String() string {
	if int(u) < len(unitStrings) {
		return unitStrings[u]
	}
	return "UNKNOWN"
}

var unitStrings = [...]string{"UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK"}
