package app

import (
	"fmt"
	"strings"

	"github.com/caarlos0/env/v11"
)

// The errors Validate reports (its checks are the table of variables',
// vars.go), and the start-up warnings of unknown and unread variables.

// ConfigError is a setting that does not parse or is out of range. It
// names the variable, the value given and what is accepted; credentials
// in the value are masked.
type ConfigError struct {
	Var   string // full variable name, such as TOLLGATE_LIMIT
	Value string // as given, credentials masked
	Want  string // what is accepted
	Why   string // what is wrong with Value, when more is known than Want says; may be empty
}

// Error names the variable, the value as given, what is wrong with it
// (when known) and what is accepted.
func (e *ConfigError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("%s=%q is invalid (%s): want %s", e.Var, e.Value, e.Why, e.Want)
	}
	return fmt.Sprintf("%s=%q is invalid: want %s", e.Var, e.Value, e.Want)
}

func configError(name, value string) *ConfigError {
	v, _ := variableNamed(name)
	if v.show != nil {
		value = v.show(value)
	}
	return &ConfigError{Var: EnvPrefix + name, Value: value, Want: v.accepts}
}

// Validate checks every setting and reports all problems as one error of
// joined *ConfigErrors.
func (c Config) Validate() error { return c.validate(nil, nil) }

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
