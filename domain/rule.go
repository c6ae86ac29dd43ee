package domain

import (
	"fmt"
	"time"
)

// Bounds of a [Rule]. They keep every algorithm's arithmetic exact on
// every store: nanosecond clocks that never overflow, microsecond
// emission intervals of at least one, counts far from 2^53.
const (
	// MinWindow is the shortest window a Rule may have.
	MinWindow = time.Millisecond
	// MaxWindow is the longest window a Rule may have: 366 days.
	MaxWindow = 366 * 24 * time.Hour
	// MaxLimit is the largest limit a Rule may have.
	MaxLimit = 1_000_000_000
	// MinInterval is the shortest time per request, window/limit, a
	// Rule may have: at most a million requests per second.
	MinInterval = time.Microsecond
)

// Rule is one tenant's budget: at most Limit requests per Window. Every
// decision is made against a rule, so each tenant can have its own.
type Rule struct {
	// Limit is the number of requests admitted per window, at least 1.
	Limit int64
	// Window is the length of the window, at least MinWindow.
	Window time.Duration
}

// Validate returns an error wrapping [ErrInvalidRule] if r's limit is
// outside [1, MaxLimit], its window outside [MinWindow, MaxWindow], or it
// admits more than one request per [MinInterval].
func (r Rule) Validate() error {
	if r.Limit < 1 || r.Limit > MaxLimit {
		return fmt.Errorf("%w: limit=%d, want 1 to %d", ErrInvalidRule, r.Limit, MaxLimit)
	}
	if r.Window < MinWindow || r.Window > MaxWindow {
		return fmt.Errorf("%w: window=%s, want %s to %s", ErrInvalidRule, r.Window, MinWindow, MaxWindow)
	}
	if r.Window/time.Duration(r.Limit) < MinInterval {
		return fmt.Errorf("%w: limit=%d per window=%s is more than one request per %s", ErrInvalidRule, r.Limit, r.Window, MinInterval)
	}
	return nil
}
