//go:build race

package integration

// raceScale is how much slower code runs under the race detector (Go's
// documentation: 2–20× CPU, typically 5–10×). Tests whose deadlines are
// about CPU time, not about Redis, stretch them by it.
const raceScale = 10
