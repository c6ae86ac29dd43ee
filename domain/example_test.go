package domain_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/domain"
)

func ExampleFixedWindow_Decide() {
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	for count := int64(1); count <= 3; count++ {
		d := domain.FixedWindow{}.Decide(count, 45*time.Second, rule)
		fmt.Printf("request %d: allowed=%v remaining=%d retry after %v\n", count, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// request 1: allowed=true remaining=1 retry after 0s
	// request 2: allowed=true remaining=0 retry after 0s
	// request 3: allowed=false remaining=0 retry after 45s
}
