package domain

import (
	"fmt"
	"time"
)

// MinWindow is the shortest window a [Rule] may have.
const MinWindow = time.Millisecond

// Rule is one tenant's budget: at most Limit requests per Window. Every
// decision is made against a rule, so each tenant can have its own.
type Rule struct {
	// Limit is the number of requests admitted per window, at least 1.
	Limit int64
	// Window is the length of the window, at least MinWindow.
	Window time.Duration
}

// NewRule returns a validated Rule, or an error wrapping [ErrInvalidRule].
func NewRule(limit int64, window time.Duration) (Rule, error) {
	r := Rule{Limit: limit, Window: window}
	return r, r.Validate()
}

// Validate returns an error wrapping [ErrInvalidRule] if r's limit is
// below 1 or its window is shorter than [MinWindow].
func (r Rule) Validate() error {
	if r.Limit < 1 {
		return fmt.Errorf("%w: limit=%d, want >= 1", ErrInvalidRule, r.Limit)
	}
	if r.Window < MinWindow {
		return fmt.Errorf("%w: window=%s, want >= %s", ErrInvalidRule, r.Window, MinWindow)
	}
	return nil
}
