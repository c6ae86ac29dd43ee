package domain_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/domain"
)

func ExampleFixedWindow() {
	var w domain.FixedWindow
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	for _, at := range []time.Duration{0, 15 * time.Second, 30 * time.Second, 60 * time.Second} {
		now := t0.Add(at)
		d := w.Decide(now, rule, domain.WindowsFromFirst, 1)
		if d.Allowed {
			w.Spend(now, rule, domain.WindowsFromFirst, 1)
		}
		fmt.Printf("t0+%v: allowed=%v remaining=%d retry after %v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t0+0s: allowed=true remaining=1 retry after 0s
	// t0+15s: allowed=true remaining=0 retry after 0s
	// t0+30s: allowed=false remaining=0 retry after 30s
	// t0+1m0s: allowed=true remaining=1 retry after 0s
}
