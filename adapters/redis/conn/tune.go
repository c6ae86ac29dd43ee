package conn

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// tuning points at the go-redis options [Open] sets for a gateway, in a
// single node's options or a cluster's (per node).
type tuning struct {
	poolSize, minIdleConns    *int
	readTimeout, writeTimeout *time.Duration
	dialTimeout               *time.Duration
	contextTimeout            *bool
	dialerRetries             *int
	disableIdentity           *bool
	maintNotifications        **maintnotifications.Config
	protocol                  *int
}

// tune applies Open's defaults to t, but for those rawURL's query sets:
// a setting in the URL wins.
func tune(rawURL string, opts Options, t tuning) {
	set := func(name string, apply func()) {
		if !queryHas(rawURL, name) {
			apply()
		}
	}
	set("pool_size", func() { *t.poolSize = opts.poolSize() })
	set("min_idle_conns", func() { *t.minIdleConns = 0 })
	// RESP2: the gateway's replies are integers, arrays and errors, the
	// same in both, and RESP3's push notifications (which a RESP3 client
	// looks for before every reply it reads: 4% of a decision's CPU on
	// this side) carry nothing it uses.
	set("protocol", func() { *t.protocol = 2 })
	if opts.Timeout > 0 {
		set("read_timeout", func() { *t.readTimeout = hardWait(opts.Timeout) })
		set("write_timeout", func() { *t.writeTimeout = hardWait(opts.Timeout) })
		set("dial_timeout", func() { *t.dialTimeout = max(2*opts.Timeout, 100*time.Millisecond) })
	}
	if opts.Cluster {
		set("read_timeout", func() { *t.readTimeout = max(*t.readTimeout, reloadTimeout) })
		set("write_timeout", func() { *t.writeTimeout = max(*t.writeTimeout, reloadTimeout) })
	}
	*t.contextTimeout = true
	*t.dialerRetries = 1
	*t.disableIdentity = true
	*t.maintNotifications = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// quietLogs silences go-redis's logger once per process.
var quietLogs sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// connBound reports whether rdb's connections time out every read and
// write within limit (so that a round trip is bounded without a
// context deadline of its own): Open's tuning, unless the URL set
// longer timeouts.
func connBound(rdb goredis.UniversalClient, limit time.Duration) bool {
	var read, write time.Duration
	switch r := rdb.(type) {
	case *goredis.Client:
		read, write = r.Options().ReadTimeout, r.Options().WriteTimeout
	case *goredis.ClusterClient:
		read, write = r.Options().ReadTimeout, r.Options().WriteTimeout
	default:
		return false
	}
	return read > 0 && read <= limit && write > 0 && write <= limit
}
