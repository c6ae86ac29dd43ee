package app

import (
	"context"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// resets is the usage of a backend: the store's reads, and resets that
// reach every place a tenant's budget lives: the store, the local fail
// mode's memory, and the deny cache.
type resets struct {
	ports.Usage
	also     []ports.Usage                         // the local fail mode's memory
	forget   []func(domain.TenantID)               // the deny cache
	announce func(context.Context, domain.Request) // to the other replicas; nil: none
	// leased: the HTTP faces' limits may be leased (TOLLGATE_LEASES), and
	// reads show the units held in slices.
	leased bool
}

// Peek reads req from the store. With leases, every limit but a
// concurrency limit is read as a token limit is, so that its decision's
// Reserved shows the units that replicas hold in slices of it now (part
// of what it has spent), as a token limit's shows its reservations.
func (r *resets) Peek(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	if !r.leased {
		return r.Usage.Peek(ctx, req)
	}
	read := req
	read.Limits = slices.Clone(req.Limits)
	for i := range read.Limits {
		if l := &read.Limits[i]; !l.Concurrency {
			l.Reserve = true
		}
	}
	return r.Usage.Peek(ctx, read)
}

// Reset resets req in the store, then in the local fail mode's memory,
// makes the deny cache forget the tenant (the next request is decided
// afresh), and tells the other replicas, whose deny caches forget it
// too and whose local memories reset the same keys (heard).
func (r *resets) Reset(ctx context.Context, req domain.Request) error {
	if err := r.Usage.Reset(ctx, req); err != nil {
		return err
	}
	for _, u := range r.also {
		if err := u.Reset(ctx, req); err != nil {
			return err
		}
	}
	for _, f := range r.forget {
		f(req.Tenant)
	}
	if r.announce != nil {
		r.announce(ctx, req)
	}
	return nil
}

// heard makes what this replica remembers of tenant forget a reset
// announced (its own included): the deny cache forgets the tenant; the
// local fail mode's memory resets keys (each less the start every key of
// the tenant shares), the limits reset, none for a message that names
// none.
func (r *resets) heard(layout ports.Keys, tenant domain.TenantID, suffixes []string) {
	for _, f := range r.forget {
		f(tenant)
	}
	if len(suffixes) == 0 {
		return
	}
	req := domain.Request{Tenant: tenant, Limits: make([]domain.Limit, len(suffixes))}
	start := layout.Tenant(tenant)
	for i, k := range suffixes {
		req.Limits[i].Key = start + k
	}
	for _, u := range r.also {
		_ = u.Reset(context.Background(), req) // memory: never fails
	}
}

// keySuffixes returns the keys of req's limits (not its concurrency
// limits': slots are requests running) less the start every key of the
// tenant shares, as a reset's message names them.
func keySuffixes(layout ports.Keys, req domain.Request) []string {
	start := layout.Tenant(req.Tenant)
	var suffixes []string
	for _, l := range req.Limits {
		if k, ok := strings.CutPrefix(l.Key, start); ok && !l.Concurrency {
			suffixes = append(suffixes, k)
		}
	}
	return suffixes
}
