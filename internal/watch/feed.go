package watch

import "sync/atomic"

// Reader is one subscriber of the feed of denials: it receives each
// denial the feed carries on C, unless its buffer is full, and counts
// what it missed.
type Reader struct {
	// C carries the denials; it is closed when the Watch closes.
	C       <-chan Event
	c       chan Event
	dropped atomic.Int64 // events it missed because it read too slowly
	base    int64        // the Watch's rate-cap drops when it subscribed
	w       *Watch
}

// Subscribe returns a new reader of the feed; Unsubscribe ends it.
func (w *Watch) Subscribe() *Reader {
	c := make(chan Event, feedBuffer)
	r := &Reader{C: c, c: c, w: w, base: w.feedDropped.Load()}
	w.hubMu.Lock()
	defer w.hubMu.Unlock()
	select {
	case <-w.stop:
		close(c)
		return r
	default:
	}
	w.hub[r] = struct{}{}
	w.readers.Add(1)
	return r
}

// Unsubscribe stops r's feed. It is idempotent.
func (r *Reader) Unsubscribe() {
	w := r.w
	w.hubMu.Lock()
	defer w.hubMu.Unlock()
	if _, ok := w.hub[r]; ok {
		delete(w.hub, r)
		w.readers.Add(-1)
	}
}

// Dropped returns how many denials r did not receive since it
// subscribed: beyond the replica's FeedRate a second, and while its
// buffer was full.
func (r *Reader) Dropped() int64 {
	return r.dropped.Load() + r.w.feedDropped.Load() - r.base
}

// fanOut hands each queued denial to every reader, dropping it for a
// reader whose buffer is full: a stalled reader never holds up the
// others nor the decisions.
func (w *Watch) fanOut() {
	defer w.done.Done()
	for {
		select {
		case <-w.stop:
			w.hubMu.Lock()
			for r := range w.hub {
				close(r.c)
				delete(w.hub, r)
			}
			w.hubMu.Unlock()
			return
		case ev := <-w.feed:
			w.hubMu.Lock()
			for r := range w.hub {
				select {
				case r.c <- ev:
				default:
					r.dropped.Add(1)
				}
			}
			w.hubMu.Unlock()
		}
	}
}
