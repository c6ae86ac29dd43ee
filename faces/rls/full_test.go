package rls_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestFullStoreSharesByDescriptor: a client who floods one descriptor
// with values (an hour's windows) fills its family's share of a bounded
// memory store, and is refused RESOURCE_EXHAUSTED past it, while another
// descriptor still gets keys; once the flood's windows have ended, a
// legitimate value of the flooded descriptor is decided again, with no
// sweeper running.
func TestFullStoreSharesByDescriptor(t *testing.T) {
	t.Parallel()
	f := newFaceWith(t, basicYAML, faceOptions{maxKeys: 100})
	refused := 0
	for i := range 200 {
		_, err := f.ShouldRateLimit(t.Context(), rq("test-domain", 0, desc("key3=attacker-"+strconv.Itoa(i))))
		switch {
		case err == nil:
		case status.Code(err) == codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("value %d: %v", i, err)
		}
	}
	if got, want := refused, 150; got != want {
		t.Errorf("values of key3 refused = %d, want %d (its share is half of 100 keys)", got, want)
	}
	check(t, "another descriptor", f.ask(t, rq("test-domain", 0, desc("key2=alice"))), ok,
		st{ok, lim(20, minute, ""), 19, 50})
	if _, err := f.ShouldRateLimit(t.Context(), rq("test-domain", 0, desc("key3=legit"))); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a value of the flooded descriptor within the hour: %v, want RESOURCE_EXHAUSTED", err)
	}
	f.clock.Advance(time.Hour)
	check(t, "a value of the flooded descriptor an hour on", f.ask(t, rq("test-domain", 0, desc("key3=legit"))), ok,
		st{ok, lim(1, hourU, ""), 0, 3590})
}
