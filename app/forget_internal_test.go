package app

import (
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// TestForgetter: tenants heard while a pass runs are forgotten together
// in the next one; add never blocks; Close waits for the pass running
// and is idempotent.
func TestForgetter(t *testing.T) {
	t.Parallel()
	started, release := make(chan []domain.TenantID), make(chan struct{})
	f := newForgetter(func(ts ...domain.TenantID) {
		started <- slices.Sorted(slices.Values(ts))
		<-release
	})
	f.add("a")
	if got := <-started; !slices.Equal(got, []domain.TenantID{"a"}) {
		t.Fatalf("first pass %v, want [a]", got)
	}
	added := make(chan struct{})
	go func() { // while the first pass is held
		for _, id := range []domain.TenantID{"c", "b", "c"} {
			f.add(id)
		}
		close(added)
	}()
	select {
	case <-added:
	case <-time.After(5 * time.Second):
		t.Fatal("add blocked while a pass ran")
	}
	release <- struct{}{}
	if got := <-started; !slices.Equal(got, []domain.TenantID{"b", "c"}) {
		t.Errorf("second pass %v, want [b c] at once", got)
	}
	closed := make(chan struct{})
	go func() {
		f.Close()
		f.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a pass ran")
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{}
	<-closed
}
