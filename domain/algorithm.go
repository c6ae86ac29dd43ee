package domain

// Algorithm names, as TOLLGATE_ALGORITHM spells them. They are part of
// every key but the primary fixed-window one.
const (
	AlgorithmFixedWindow   = "fixed_window"
	AlgorithmSlidingLog    = "sliding_log"
	AlgorithmSlidingWindow = "sliding_window"
	AlgorithmTokenBucket   = "token_bucket"
)

// Algorithm is one row of the table of algorithms: its name and, in a
// phrase, when it admits.
type Algorithm struct {
	// Name is the value of TOLLGATE_ALGORITHM, and part of its keys.
	Name string
	// Summary says when the algorithm admits, for -h and the docs.
	Summary string
}

// Algorithms is every algorithm tollgate has, the default first. It is
// the one table that configuration, -h, the composition root, every
// store and the conformance tests read: every store implements every
// row (a test of each store checks it), so a new row is a new algorithm
// everywhere.
var Algorithms = []Algorithm{
	{AlgorithmFixedWindow, "count per window from its first request; up to 2x the limit across a boundary"},
	{AlgorithmSlidingLog, "exact: fewer than limit admitted in the trailing window; O(limit) memory"},
	{AlgorithmSlidingWindow, "weighted estimate of the trailing window from two counts"},
	{AlgorithmTokenBucket, "a bucket of limit tokens refilled at limit/window (GCRA)"},
}

// AlgorithmNames returns every algorithm's name, in table order.
func AlgorithmNames() []string {
	names := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		names[i] = a.Name
	}
	return names
}

// ValidAlgorithm reports whether name is a row of [Algorithms].
func ValidAlgorithm(name string) bool {
	for _, a := range Algorithms {
		if a.Name == name {
			return true
		}
	}
	return false
}
