package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ports"
)

type downStore struct{}

func (downStore) Ping(context.Context) error { return errors.New("redis down") }

// TestHealthcheckStore: /healthcheck says the process serves whatever the
// store does, as envoyproxy/ratelimit's by default, and follows the store
// only when asked (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
func TestHealthcheckStore(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		follow   bool
		wantCode int
	}{{"by default", false, http.StatusOK}, {"following the store", true, http.StatusInternalServerError}} {
		_, e, err := fromEnvoy([]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=" + map[bool]string{true: "true", false: "false"}[tt.follow]})
		if err != nil {
			t.Fatal(err)
		}
		if e.healthFollowsStore != tt.follow {
			t.Fatalf("%s: healthFollowsStore %v", tt.name, e.healthFollowsStore)
		}
		var store ports.Pinger
		if e.healthFollowsStore {
			store = downStore{}
		}
		h := withHealthcheck(http.NotFoundHandler(), store, time.Second)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthcheck", nil))
		if w.Code != tt.wantCode {
			t.Errorf("%s, Redis down: /healthcheck %d, want %d", tt.name, w.Code, tt.wantCode)
		}
	}
}
