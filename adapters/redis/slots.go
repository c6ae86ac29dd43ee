package redis

import "github.com/tollgate/tollgate/domain"

// slotKeys returns the keys of req's concurrency limits i for which
// took(i).
func slotKeys(req domain.Request, took func(i int) bool) []string {
	var keys []string
	for i, lim := range req.Limits {
		if lim.Concurrency && took(i) {
			keys = append(keys, lim.Key)
		}
	}
	return keys
}
