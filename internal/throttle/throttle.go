// Package throttle bounds how often a line is logged: at most one per
// interval however many events there are, each line saying how many it
// stands for. During an outage every request fails, and a line per
// request would flood the log when it matters most.
package throttle

import (
	"sync/atomic"
	"time"
)

// Log calls write at most once per Interval. The zero value (Interval
// 0) writes every event; set Interval. A Log is safe for concurrent use
// by multiple goroutines.
type Log struct {
	// Interval is the least time between two lines.
	Interval   time.Duration
	last       atomic.Int64 // unix nanos of the last line; 0: none yet
	suppressed atomic.Int64 // events since the last line
}

// Do calls write with the number of events the line stands for (this one
// and those suppressed since the last line), unless a line was written
// less than Interval ago (from the end of its write).
func (l *Log) Do(write func(n int64)) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if (last != 0 && now-last < int64(l.Interval)) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	write(l.suppressed.Swap(0) + 1)
	// The interval runs from the end of the write: a line's time stamp
	// is taken in write, and the next line's comes at least Interval
	// after it, however long this one took to be stamped.
	l.last.Store(time.Now().UnixNano())
}
