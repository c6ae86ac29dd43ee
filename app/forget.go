package app

import (
	"sync"

	"github.com/tollgate/tollgate/domain"
)

// forgetter clears tenants' local fail-mode counts away from the
// goroutine that hears resets: a pass visits every key of the memory
// store, so the tenants heard while one runs wait for the next, which
// takes them all at once. What it holds is bounded by the tenants heard.
type forgetter struct {
	forget  func(tenants ...domain.TenantID)
	mu      sync.Mutex
	pending map[domain.TenantID]bool
	wake    chan struct{} // one pending wake-up at most
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// newForgetter starts the goroutine that calls forget.
func newForgetter(forget func(tenants ...domain.TenantID)) *forgetter {
	f := &forgetter{forget: forget, pending: map[domain.TenantID]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

// add asks for tenant's counts to be forgotten, soon. It never blocks.
func (f *forgetter) add(tenant domain.TenantID) {
	f.mu.Lock()
	f.pending[tenant] = true
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default: // a pass is due already, and takes tenant too
	}
}

func (f *forgetter) run() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		batch := make([]domain.TenantID, 0, len(f.pending))
		for t := range f.pending {
			batch = append(batch, t)
		}
		f.pending = map[domain.TenantID]bool{} // not the peak's size for good
		f.mu.Unlock()
		f.forget(batch...)
	}
}

// Close stops the goroutine, leaving what is pending, and waits for the
// pass that runs. It is idempotent.
func (f *forgetter) Close() error {
	f.once.Do(func() { close(f.stop) })
	<-f.done
	return nil
}
