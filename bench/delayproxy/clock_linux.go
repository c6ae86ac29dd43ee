package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// clock wakes goroutines at given times with the kernel's
// high-resolution timers: one timerfd for the whole proxy, read by one
// goroutine (run) in Go's netpoller, which returns as soon as the timer
// fires. time.Sleep and read deadlines instead wake at the netpoller's
// next whole millisecond: about 1.1 ms for any wait under 1 ms, measured
// on this kernel, too coarse for a 0.2 ms lane. One timer for all lines,
// rather than one each, because under load one wake-up then serves every
// line due by then: a timerfd per line cost two more system calls per
// chunk, and the proxy the better part of a core.
//
// Even so a write comes some tens of µs after the timer fires (the
// netpoller, the scheduler, the hand-off to the line's writer), twice a
// round trip: at 0.2 ms that alone is 30% too much. So the writers tell
// the clock how late they write (observe), the clock fires that much
// early, and due counts as due what falls within that lead: the writes
// then land on time, as a median.
//
// A clock is safe for concurrent use by multiple goroutines.
type clock struct {
	fd   int          // the timerfd; f owns it
	f    *os.File     // the same fd in the netpoller
	lead atomic.Int64 // ns: how early to fire; observe moves it

	mu     sync.Mutex // guards the fields below
	queue  []wakeup   // a min-heap by due
	armed  bool       // the timerfd is set, for fireAt
	fireAt int64      // when the timerfd fires
}

// wakeup is one waiter: c is woken once due.
type wakeup struct {
	due int64 // on the nanotime clock
	c   chan struct{}
}

const (
	// leadStep is how far one observation moves the lead.
	leadStep = int64(time.Microsecond)
	// maxLead bounds the lead, so that a run of stalled wake-ups (the
	// machine busy elsewhere) cannot make every chunk leave early.
	maxLead = 200 * int64(time.Microsecond)
)

// newClock returns a clock; its goroutine is run.
func newClock() (*clock, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	return &clock{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}, nil
}

// due reports whether what falls due at the nanotime at is due now: at
// most the clock's lead from now.
func (k *clock) due(at int64) bool { return at <= nanotime()+k.lead.Load() }

// wakeAt wakes c (a non-blocking send) at about the nanotime at, and at
// once if that has passed.
func (k *clock) wakeAt(at int64, c chan struct{}) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.push(wakeup{at, c})
	if k.armed && at-k.lead.Load() >= k.fireAt {
		return nil
	}
	return k.arm(at)
}

// arm sets the timerfd to fire the lead before at, or at once.
// Requires k.mu held.
func (k *clock) arm(at int64) error {
	now := nanotime()
	fire := max(at-k.lead.Load(), now+1)
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(fire - now)}
	if err := unix.TimerfdSettime(k.fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	k.armed, k.fireAt = true, fire
	return nil
}

// observe takes how late (ns; negative: early) a write the clock timed
// came, and moves the lead a step towards the median: writes are mostly
// a few tens of µs late and now and then much later (the machine busy
// elsewhere), which an average would chase. Concurrent observations may
// overwrite each other's step; no matter.
func (k *clock) observe(late int64) {
	lead := k.lead.Load()
	if late > 0 {
		lead = min(lead+leadStep, maxLead)
	} else {
		lead = max(lead-leadStep, 0)
	}
	k.lead.Store(lead)
}

// run wakes the waiters as they fall due, until the clock is closed
// (it then returns nil).
func (k *clock) run() error {
	var buf [8]byte // the expiration count
	for {
		if _, err := k.f.Read(buf[:]); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("timerfd read: %w", err)
		}
		k.mu.Lock()
		now, lead := nanotime(), k.lead.Load()
		k.armed = false
		for len(k.queue) > 0 && k.queue[0].due <= now+lead {
			wake(k.pop().c)
		}
		var err error
		if len(k.queue) > 0 {
			err = k.arm(k.queue[0].due)
		}
		k.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// Close stops run and releases the timerfd.
func (k *clock) Close() error { return k.f.Close() }

// push adds w to the heap. Requires k.mu held.
func (k *clock) push(w wakeup) {
	q := append(k.queue, w)
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if q[p].due <= q[i].due {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
	k.queue = q
}

// pop removes and returns the earliest wakeup. Requires k.mu held and
// the heap not empty.
func (k *clock) pop() wakeup {
	q := k.queue
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = wakeup{} // drop the channel
	q = q[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && q[c+1].due < q[c].due {
			c++
		}
		if q[i].due <= q[c].due {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	k.queue = q
	return top
}
