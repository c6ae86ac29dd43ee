package redis

import (
	"sync/atomic"

	"github.com/tollgate/tollgate/domain"
)

// slotKeys returns the keys of req's concurrency limits i for which
// took(i).
func slotKeys(req domain.Request, took func(i int) bool) []string {
	var keys []string
	for i, lim := range req.Limits {
		if lim.Concurrency && took(i) {
			keys = append(keys, lim.Key)
		}
	}
	return keys
}

// holding is the slots one admitted request holds.
type holding struct {
	leases *Leases
	keys   []string
	holder string
	done   atomic.Bool
}

// release implements [domain.Verdict.Release]: once, in one round trip.
func (h *holding) release() {
	if h.done.CompareAndSwap(false, true) {
		h.leases.release(h.keys, h.holder)
	}
}
