package app

import (
	"log/slog"
	"strings"

	"github.com/caarlos0/env/v11"
)

// The start-up warnings of unknown and unread variables (the checks and
// their errors are the table of variables', vars.go).

// warnIgnored logs a warning for each TOLLGATE_* variable of environ that
// no setting reads, or that cfg's other settings leave unread: neither
// stops the process.
func warnIgnored(log *slog.Logger, cfg Config, environ []string) {
	for _, u := range unknownVariables(environ) {
		log.Warn("unknown variable ignored: no setting reads it", "variable", u.name, "did_you_mean", u.meant)
	}
	for _, v := range ineffectiveVariables(cfg, environ) {
		log.Warn("variable ignored: it has no effect with the other settings", "variable", v.name, "applies_with", v.appliesWith)
	}
}

// unknownVariable is a TOLLGATE_* variable tollgate does not read, and
// the one it most likely meant ("" when none is close).
type unknownVariable struct {
	name, meant string
}

// unknownVariables returns the TOLLGATE_* variables of environ that no
// setting reads, in environ's order: a misspelt one (TOLLGATE_LIMT)
// leaves its setting at the default, which the start-up log then says.
func unknownVariables(environ []string) []unknownVariable {
	var out []unknownVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		short, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		if _, ok := variableNamed(short); ok {
			continue
		}
		u := unknownVariable{name: name}
		best := 3 // at most 2 edits away
		for _, v := range variables {
			if d := editDistance(strings.ToUpper(short), v.name); d < best || (d == best && EnvPrefix+v.name < u.meant) {
				best, u.meant = d, EnvPrefix+v.name
			}
		}
		out = append(out, u)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ineffectiveVariable is a TOLLGATE_* variable set to a value that the
// other settings make moot, and what it applies with.
type ineffectiveVariable struct {
	name, appliesWith string
}

// ineffectiveVariables returns the variables of environ, in a fixed
// order, that are set to a value other than empty and their default but
// that cfg's other settings leave unread: a TOLLGATE_REDIS_URL without
// TOLLGATE_STORE=redis runs each replica on its own in-memory budget,
// and a TOLLGATE_LIMIT beside a policy file meters nothing. The start-up
// log says so, as it does of unknown variables; neither stops the
// process. (A default, as docker-compose.yml passes TOLLGATE_REPLICAS=0,
// changes nothing either way.)
func ineffectiveVariables(cfg Config, environ []string) []ineffectiveVariable {
	vars := env.ToMap(environ) // the last one wins, as in LoadConfig
	var out []ineffectiveVariable
	for _, v := range variables {
		if val := vars[EnvPrefix+v.name]; v.unread != nil && v.unread.holds(cfg) && val != "" && val != v.def {
			out = append(out, ineffectiveVariable{name: EnvPrefix + v.name, appliesWith: v.unread.appliesWith})
		}
	}
	return out
}
