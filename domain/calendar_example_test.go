package domain_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// A billing month anchored on the 31st in Berlin: it starts on the last
// day of the shorter months and returns to the 31st after them, and its
// length follows the clock changes.
func ExampleCalendar_Period() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	c := domain.Calendar{Unit: domain.PeriodMonth, Location: berlin, AnchorDay: 31}
	if err := c.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2028, 2, 10, 12, 0, 0, 0, time.UTC)
	for range 4 {
		start, end := c.Period(at)
		fmt.Printf("%s to %s: %.0f s\n", start.Format("Jan 2 15:04 MST"), end.Format("Jan 2 15:04 MST"), end.Sub(start).Seconds())
		at = end
	}
	// Output:
	// Jan 31 00:00 CET to Feb 29 00:00 CET: 2505600 s
	// Feb 29 00:00 CET to Mar 31 00:00 CEST: 2674800 s
	// Mar 31 00:00 CEST to Apr 30 00:00 CEST: 2592000 s
	// Apr 30 00:00 CEST to May 31 00:00 CEST: 2678400 s
}
