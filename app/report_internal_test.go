package app

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
	"github.com/tollgate/tollgate/ports"
)

// TestStoreErrorReporterCountsCallsNotRefusals: failed store calls are
// counted; decisions the open breaker refused without a call are logged
// with them (one line a second) but not counted.
func TestStoreErrorReporterCountsCallsNotRefusals(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs logtest.Buffer
	report := storeErrorReporter(slog.New(slog.NewJSONHandler(&logs, nil)), metrics.New(reg, "fixed_window"), FailLocal)
	for range 3 {
		report(errors.New("redis: i/o timeout"))
	}
	for range 5 {
		report(fmt.Errorf("decide: %w", ports.ErrBreakerOpen))
	}
	if got := metricstest.Value(t, reg, "tollgate_store_errors_total"); got != 3 {
		t.Errorf("tollgate_store_errors_total = %v after 3 failed calls and 5 refusals, want 3", got)
	}
	if n := strings.Count(logs.String(), "rate-limit store error; failing local: deciding in process"); n != 1 {
		t.Errorf("store-error lines = %d, want 1 (at most one a second): %s", n, logs.String())
	}
}

// TestStoreErrorReporterOneLineASecond: 500 store errors within a second,
// or 1600 from 16 goroutines, log one line, which holds the error and
// how many it stands for; every one is counted.
func TestStoreErrorReporterOneLineASecond(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{FailOpen, FailClosed} {
		reg := prometheus.NewRegistry()
		var logs logtest.Buffer
		report := storeErrorReporter(slog.New(slog.NewJSONHandler(&logs, nil)), metrics.New(reg, "fixed_window"), mode)
		storeErr := errors.New("dial tcp 10.0.0.1:6379: connection refused")
		for range 500 {
			report(storeErr)
		}
		if n := strings.Count(logs.String(), "\n"); n != 1 {
			t.Errorf("%s: 500 store errors within a second logged %d lines, want 1:\n%s", mode, n, logs.String())
		}
		if !strings.Contains(logs.String(), "connection refused") {
			t.Errorf("%s: log line lacks the error: %s", mode, logs.String())
		}
		if got := metricstest.Value(t, reg, "tollgate_store_errors_total"); got != 500 {
			t.Errorf("%s: tollgate_store_errors_total = %v, want 500", mode, got)
		}
	}
	var logs logtest.Buffer
	report := storeErrorReporter(slog.New(slog.NewJSONHandler(&logs, nil)), nil, FailOpen)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				report(errors.New("boom"))
			}
		})
	}
	wg.Wait()
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Errorf("1600 concurrent store errors logged %d lines, want 1", n)
	}
}
