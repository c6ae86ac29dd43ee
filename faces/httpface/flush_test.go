package httpface_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/faces/httpface"
)

// noFlush is a ResponseWriter that cannot flush.
type noFlush struct{ http.ResponseWriter }

// TestFlush: Flush unwraps writers until one flushes, without a
// controller allocated per call (a stream of events flushes at every
// event), and says when none can.
func TestFlush(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := &httpface.StatusWriter{ResponseWriter: rec}
	if err := httpface.Flush(sw); err != nil || !rec.Flushed {
		t.Errorf("Flush through a StatusWriter: %v, flushed %v; want nil, true", err, rec.Flushed)
	}
	if n := testing.AllocsPerRun(100, func() { _ = httpface.Flush(sw) }); n != 0 {
		t.Errorf("Flush allocates %v times, want 0", n)
	}
	if err := httpface.Flush(noFlush{rec}); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("Flush of a writer that cannot: %v, want http.ErrNotSupported", err)
	}
}
