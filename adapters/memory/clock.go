package memory

import "time"

// clock reads time as nanoseconds since its origin.
type clock struct {
	origin time.Time
	now    func() time.Time // nil: time.Since(origin)
}

func newClock(now func() time.Time) clock {
	if now == nil {
		return clock{origin: time.Now()}
	}
	return clock{origin: now(), now: now}
}

// read returns the current time, and the same instant as nanoseconds
// since c's origin. The default keeps the monotonic reading, so wall-clock
// steps never move a window.
func (c clock) read() (time.Time, int64) {
	if c.now == nil {
		d := time.Since(c.origin)
		return c.origin.Add(d), int64(d)
	}
	t := c.now()
	return t, int64(t.Sub(c.origin))
}

// nanos returns the time since c's origin, in nanoseconds.
func (c clock) nanos() int64 {
	if c.now == nil {
		return int64(time.Since(c.origin))
	}
	return int64(c.now().Sub(c.origin))
}
