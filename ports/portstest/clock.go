package portstest

import (
	"sync"
	"time"
)

// FakeClock is a [Clock] whose time moves only when told. Its Now fits the
// Now field of a store's options. It is safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewFakeClock returns a clock that reads t until advanced.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
