package admin_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/faces/admin"
)

// TestReadyzSaysWhy: /readyz answers 503 while the store does not answer
// its ping, and the log says why, at most once a second however often
// the probe asks; 200 once it answers.
func TestReadyzSaysWhy(t *testing.T) {
	t.Parallel()
	var down bool
	var logs bytes.Buffer
	h := admin.New(pingerFunc(func(context.Context) error {
		if down {
			return errors.New("dial tcp 10.0.0.7:6379: connection refused")
		}
		return nil
	}), time.Second, prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(&logs, nil)))
	probe := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return w.Code
	}
	down = true
	for range 3 {
		if code := probe(); code != http.StatusServiceUnavailable {
			t.Errorf("store down: %d, want 503", code)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"readyz: the store does not answer","err":"dial tcp 10.0.0.7:6379: connection refused"`); n != 1 {
		t.Errorf("log %q: %d lines about the failed probes, want 1 (at most one a second)", logs.String(), n)
	}
	down = false
	if code := probe(); code != http.StatusOK {
		t.Errorf("store back: %d, want 200", code)
	}
}
