package rls

import (
	"sync"
	"sync/atomic"
)

// maxLabelLen is the longest detailed rule label kept: a longer one (a
// client's value of any size) is OtherRuleLabel.
const maxLabelLen = 256

// labelCap admits at most MaxDetailedLabels distinct labels of at most
// maxLabelLen bytes, then stands OtherRuleLabel for any other. It is
// safe for concurrent use.
type labelCap struct {
	seen sync.Map // label → struct{}
	n    atomic.Int64
}

// label returns l if it was admitted, or can be, else OtherRuleLabel.
func (c *labelCap) label(l string) string {
	if len(l) > maxLabelLen {
		return OtherRuleLabel
	}
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
