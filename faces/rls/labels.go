package rls

import (
	"sync"
	"sync/atomic"
)

// labelCap admits at most MaxDetailedLabels distinct labels, then
// stands OtherRuleLabel for any other. It is safe for concurrent use.
type labelCap struct {
	seen sync.Map // label → struct{}
	n    atomic.Int64
}

// label returns l if it was admitted, or can be, else OtherRuleLabel.
func (c *labelCap) label(l string) string {
	if _, ok := c.seen.Load(l); ok {
		return l
	}
	if c.n.Add(1) > MaxDetailedLabels {
		c.n.Add(-1)
		return OtherRuleLabel
	}
	if _, loaded := c.seen.LoadOrStore(l, struct{}{}); loaded {
		c.n.Add(-1)
	}
	return l
}
