package redis

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/domain"
)

// Peek implements [ports.Usage]: the script in peek mode, one round trip
// that decides every limit at cost 0 and writes nothing.
func (l *Limiter) Peek(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	return l.run(ctx, req, nil, modePeek)
}

// Reset implements [ports.Usage]: one DEL of every limit's key (a
// calendar limit's periods around now), in one round trip: the keys
// share the tenant's slot.
func (l *Limiter) Reset(ctx context.Context, req domain.Request) error {
	if l.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	} else if l.client.Timeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.client.Timeout()) // a decision's deadline, as a read's
		defer cancel()
	}
	keys := make([]string, 0, len(req.Limits))
	now := l.now()
	for _, lim := range req.Limits {
		if lim.Concurrency {
			continue // slots are requests running, not a budget: they end on their own
		}
		if lim.Calendar == nil {
			keys = append(keys, lim.Key)
			continue
		}
		prev, cur, next := periodsAround(*lim.Calendar, now).keys(lim.Key)
		keys = append(keys, prev, cur, next)
	}
	if len(keys) == 0 {
		return nil
	}
	if err := l.client.Redis().Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("redis: reset %q: %w", keys[0], err)
	}
	return nil
}
