package tokens

import (
	"bytes"
	"encoding/json"
)

// MaxCount is the largest count a usage report may hold: a number past
// it (or negative, fractional, a string) makes the report absurd, and an
// absurd report counts as none.
const MaxCount = 1_000_000_000

// Usage merges the usage objects an answer reports: each count keeps the
// last value reported (a stream's cumulative counts are never added up),
// and [Usage.Total] applies the order total_tokens, else prompt_tokens +
// completion_tokens, else input_tokens + output_tokens to the merge.
// The zero value has seen nothing.
type Usage struct {
	counts [numCounts]int64 // a count's last value; -1 while unreported
	seen   bool
}

// The counts of a usage object, in the order Total reads them.
const (
	totalTokens = iota
	promptTokens
	completionTokens
	inputTokens
	outputTokens
	numCounts
)

var countNames = [numCounts]string{"total_tokens", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"}

// Total returns the units the merged reports come to, and whether any
// report held a count to take them from.
func (u *Usage) Total() (int64, bool) {
	if !u.seen {
		return 0, false
	}
	c := u.counts
	switch {
	case c[totalTokens] >= 0:
		return c[totalTokens], true
	case c[promptTokens] >= 0 || c[completionTokens] >= 0:
		return max(c[promptTokens], 0) + max(c[completionTokens], 0), true
	case c[inputTokens] >= 0 || c[outputTokens] >= 0:
		return max(c[inputTokens], 0) + max(c[outputTokens], 0), true
	}
	return 0, false
}

// Add merges raw, one usage object. It reports whether raw counted: an
// object whose counts are all absent or null, or whose any count is not
// an integer 0–[MaxCount] (absurd), changes nothing.
func (u *Usage) Add(raw []byte) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return false
	}
	var next [numCounts]int64
	reported := false
	for i, name := range countNames {
		next[i] = -1
		v, ok := obj[name]
		if !ok || isNull(v) {
			continue
		}
		n, ok := usageCount(v)
		if !ok {
			return false
		}
		next[i], reported = n, true
	}
	if !reported {
		return false
	}
	if !u.seen {
		u.seen = true
		for i := range u.counts {
			u.counts[i] = -1
		}
	}
	for i, n := range next {
		if n >= 0 {
			u.counts[i] = n
		}
	}
	return true
}

// usageCount reads raw as a count: digits alone, 0–MaxCount.
func usageCount(raw []byte) (int64, bool) {
	if bytes.Equal(raw, []byte("0")) {
		return 0, true
	}
	v, ok := positive(raw)
	return v, ok && v <= MaxCount
}

// ParseCount reads a header's value as a count: digits alone (spaces
// around them allowed), 0–[MaxCount].
func ParseCount(s string) (int64, bool) {
	return usageCount(bytes.TrimSpace([]byte(s)))
}
