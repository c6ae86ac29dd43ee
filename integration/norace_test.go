//go:build !race

package integration

// raceScale is 1 without the race detector (see race_test.go).
const raceScale = 1
