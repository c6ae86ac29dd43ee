//go:build linux

package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

const (
	// minBuffer is the ring a direction starts with, and the least
	// -max-buffer may be.
	minBuffer = 4 << 10
	// maxStamps bounds the chunks in flight per direction (every read
	// is one), so that a sender of tiny writes cannot grow the queue
	// beyond 128 KiB of stamps.
	maxStamps = 8192
)

// epoch is the origin of the lines' clock: due times are monotonic
// nanoseconds since it.
var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }

// stamp marks the end of one chunk in the stream, and when it is due.
type stamp struct {
	end int64 // stream offset just past the chunk
	due int64 // on the nanotime clock
}

// line is one direction of a proxied connection: the bytes read from the
// source, each chunk held until its due time (when it was read, plus the
// delay) and then written to the destination, in order. One goroutine
// fills it and another drains it; many chunks wait at once, so it is a
// delay line and not a sleep per request.
type line struct {
	delay int64 // nanoseconds each chunk waits
	max   int   // the ring's largest size, a power of two

	mu     sync.Mutex // guards the fields below
	buf    []byte     // the ring; its length is a power of two
	r, w   int64      // stream offsets: written to the destination, read from the source
	stamps []stamp    // stamps[head:] are the chunks not yet written
	head   int
	eof    bool  // the source has ended; no more stamps come
	eofDue int64 // when to pass the end on
	dead   bool  // the connection is being torn down: both sides stop
	idle   bool  // the drainer waits for something to pass on: the filler schedules it
	timed  bool  // the clock times the drainer's next write: it is to observe it

	tick  chan struct{} // 1-buffered: for the drainer, from the clock (or the filler), or death
	space chan struct{} // 1-buffered: room or death, for the filler
}

// newLine returns a line that delays every chunk by delay and holds at
// most max bytes (rounded down to a power of two, at least minBuffer).
func newLine(delay time.Duration, max int) *line {
	size := minBuffer
	for size*2 <= max {
		size *= 2
	}
	return &line{
		delay: int64(delay),
		max:   size,
		buf:   make([]byte, minBuffer),
		tick:  make(chan struct{}, 1),
		space: make(chan struct{}, 1),
	}
}

// relay copies src to dst through a line that delays by delay, until
// src ends (then it half-closes dst, delay after the end) or either side
// fails (then it closes both, which also stops the other direction).
// The clock k times the chunks. It returns the first failure, nil after
// a clean end.
func relay(dst, src *net.TCPConn, delay time.Duration, max int, k *clock) error {
	l := newLine(delay, max)
	in, err := newTCPSource(src)
	if err != nil {
		src.Close()
		dst.Close()
		return err
	}
	drained := make(chan error, 1)
	go func() {
		err := l.drain(dst, k)
		if err != nil {
			l.kill()
			src.Close()
			dst.Close()
		}
		drained <- err
	}()
	if err := l.fill(in, k); err != nil {
		l.kill()
		src.Close()
		dst.Close()
		return errors.Join(err, <-drained)
	}
	return <-drained
}

// fill reads src into the line until src ends (nil) or fails, or the
// line dies (nil); each chunk is due the delay after it arrived. What it gives an idle drainer it also schedules with
// the clock k: one hand-off a chunk, not a wake-up to then ask the clock.
func (l *line) fill(src source, k *clock) error {
	for {
		p, ok := l.room()
		if !ok {
			return nil
		}
		n, arrived, err := src.read(p)
		due := arrived + l.delay
		end := errors.Is(err, io.EOF)
		l.mu.Lock()
		if n > 0 {
			l.w += int64(n)
			if len(l.stamps) == cap(l.stamps) && l.head > 0 {
				l.stamps = l.stamps[:copy(l.stamps, l.stamps[l.head:])]
				l.head = 0
			}
			l.stamps = append(l.stamps, stamp{end: l.w, due: due})
		}
		if end {
			l.eof, l.eofDue = true, due
		}
		schedule := l.idle && (n > 0 || end)
		if schedule {
			l.idle, l.timed = false, !k.due(due)
		}
		l.mu.Unlock()
		if schedule {
			if err := l.await(k, due); err != nil {
				return err
			}
		}
		if end {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// await has the clock k wake the drainer at the nanotime due, or wakes
// it now if that is due.
func (l *line) await(k *clock, due int64) error {
	if k.due(due) {
		wake(l.tick)
		return nil
	}
	return k.wakeAt(due, l.tick)
}

// room waits until the line can take more (growing the ring while it
// may) and returns the free part of the ring that follows the data. It
// reports false once the line is dead.
func (l *line) room() ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.dead {
			return nil, false
		}
		free := len(l.buf) - int(l.w-l.r)
		if free < len(l.buf)/4 && len(l.buf) < l.max {
			l.grow()
			continue
		}
		if free > 0 && len(l.stamps)-l.head < maxStamps {
			start := int(l.w) & (len(l.buf) - 1)
			return l.buf[start : start+min(free, len(l.buf)-start)], true
		}
		l.mu.Unlock()
		<-l.space
		l.mu.Lock()
	}
}

// grow doubles the ring, keeping every byte at its stream offset.
// A drainer may be writing from the old ring meanwhile: it stays intact.
// Requires l.mu held.
func (l *line) grow() {
	nb := make([]byte, 2*len(l.buf))
	for pos := l.r; pos < l.w; {
		o, n := int(pos)&(len(l.buf)-1), int(pos)&(len(nb)-1)
		k := min(int(l.w-pos), len(l.buf)-o, len(nb)-n)
		copy(nb[n:n+k], l.buf[o:o+k])
		pos += int64(k)
	}
	l.buf = nb
}

// drain writes each chunk to dst when the clock k says it is due, every
// chunk due by then in one write, until the end has been passed on
// (nil), a write fails, or the line dies (nil).
func (l *line) drain(dst io.Writer, k *clock) error {
	var vec net.Buffers
	for {
		l.mu.Lock()
		if l.dead {
			l.mu.Unlock()
			return nil
		}
		if l.head == len(l.stamps) {
			eof, due := l.eof, l.eofDue
			if !eof {
				l.idle = true
				l.mu.Unlock()
				<-l.tick
				continue
			}
			l.mu.Unlock()
			if !k.due(due) {
				if err := k.wakeAt(due, l.tick); err != nil {
					return err
				}
				<-l.tick
				continue
			}
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				return cw.CloseWrite()
			}
			return nil
		}
		if due := l.stamps[l.head].due; !k.due(due) {
			l.timed = true
			l.mu.Unlock()
			if err := k.wakeAt(due, l.tick); err != nil {
				return err
			}
			<-l.tick
			continue
		}
		end, first, timed := l.r, l.stamps[l.head].due, l.timed
		l.timed = false
		for l.head < len(l.stamps) && k.due(l.stamps[l.head].due) {
			end = l.stamps[l.head].end
			l.head++
		}
		if l.head == len(l.stamps) {
			l.stamps, l.head = l.stamps[:0], 0
		}
		vec = l.span(vec[:0], l.r, end)
		l.mu.Unlock()
		if timed {
			k.observe(nanotime() - first)
		}
		if _, err := vec.WriteTo(dst); err != nil {
			return err
		}
		l.mu.Lock()
		l.r = end
		l.mu.Unlock()
		wake(l.space)
	}
}

// span appends the ring's bytes from stream offset from to to (one or
// two slices: the ring may wrap) to vec. Requires l.mu held.
func (l *line) span(vec net.Buffers, from, to int64) net.Buffers {
	mask := len(l.buf) - 1
	a, b := int(from)&mask, int(to)&mask
	if to-from == int64(len(l.buf)) || (b <= a && to > from) {
		return append(vec, l.buf[a:], l.buf[:b])
	}
	return append(vec, l.buf[a:b])
}

// kill marks the line dead and wakes both sides.
func (l *line) kill() {
	l.mu.Lock()
	l.dead = true
	l.mu.Unlock()
	wake(l.tick)
	wake(l.space)
}

// wake wakes the one waiter on c, if it is not already due to wake.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
