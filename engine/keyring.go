package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/ports"
)

// Bounds of the key API.
const (
	// DefaultMaxKeysPerTenant is how many live keys a tenant may have
	// when [KeyRingOptions].MaxPerTenant is zero.
	DefaultMaxKeysPerTenant = 100
	// MaxKeyGrace is the longest grace a revocation may give a key.
	MaxKeyGrace = 24 * time.Hour
	// MaxKeyLifetime is the longest expiry a key may be created with.
	MaxKeyLifetime = 10 * 366 * 24 * time.Hour
	// KeyPrefix starts every key the key API issues.
	KeyPrefix = "tg_"
	// keyRandomBytes is how many random bytes a key holds: 192 bits.
	keyRandomBytes = 24
	// keyShown is how many of a key's first characters a list shows.
	keyShown = 6
	// syncBatch is how many changes one read of the store asks for.
	syncBatch = 1024
)

// Errors of the key API, beside [ErrNoTenant] and
// [domain.ErrInvalidTenant].
var (
	ErrKeyLifetime = fmt.Errorf("engine: a key's expiry must be after 0s and at most %s", MaxKeyLifetime)
	ErrKeyGrace    = fmt.Errorf("engine: a revocation's grace must be from 0s to %s", MaxKeyGrace)
	ErrNoKeyRing   = errors.New("engine: no key ring")
)

// KeyRingOptions configure [NewKeyRing].
type KeyRingOptions struct {
	// Store keeps the keys, shared by the replicas that share it.
	// Required.
	Store ports.APIKeys
	// Interval is the time between two reads of the store's changes.
	// Zero means 100ms.
	Interval time.Duration
	// Trust is how long after the start of its last read of the store
	// that succeeded the ring still resolves its keys: a replica that
	// cannot read the store stops trusting what it holds, since a
	// revocation may have been made meanwhile. Zero means forever: a
	// store no other replica writes to (in process), which cannot fail.
	Trust time.Duration
	// MaxPerTenant is how many live keys a tenant may have. Zero means
	// DefaultMaxKeysPerTenant.
	MaxPerTenant int
	// Log gets at most one line a minute about reads of the store that
	// fail, and at most one a minute when they succeed again. May be nil.
	Log *slog.Logger
	// OnRead, if not nil, is told of every read of the store: its error
	// (nil when it succeeded), and how many keys the ring then holds.
	OnRead func(err error, held int)
}

// KeyRing is the API keys issued at runtime, as one replica holds them:
// a copy of the store's, kept within Interval of it by reading the
// store's changes, so that resolving a key never waits for the store.
// It holds each key's SHA-256 and tenant, never a key.
//
// It is safe for concurrent use by multiple goroutines.
type KeyRing struct {
	opts KeyRingOptions
	base time.Time // what the monotonic instants below count from

	mu       sync.RWMutex // guards byHash
	byHash   map[[sha256.Size]byte]ringKey
	count    atomic.Int64 // len(byHash)
	expiring atomic.Int64 // keys added with an expiry since the last sweep

	syncMu    sync.Mutex // one read of the store at a time; guards cursor, loaded
	cursor    ports.KeyCursor
	loaded    bool
	confirmed atomic.Int64 // the start of the last read that succeeded, since base (ns); 0: none
	failing   atomic.Bool
	failLog   throttle.Log
	backLog   throttle.Log
}

// ringKey is what the ring holds of a key.
type ringKey struct {
	tenant  domain.TenantID
	expires int64 // unix ns; 0: never
}

// NewKeyRing returns an empty ring over opts.Store: [KeyRing.Sync] or
// [KeyRing.Run] fill it.
func NewKeyRing(opts KeyRingOptions) *KeyRing {
	if opts.Store == nil {
		panic("engine: NewKeyRing needs a store")
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.MaxPerTenant <= 0 {
		opts.MaxPerTenant = DefaultMaxKeysPerTenant
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	// base is before any instant the ring reads, none of which is then 0
	// (never).
	r := &KeyRing{opts: opts, base: time.Now().Add(-time.Second), byHash: make(map[[sha256.Size]byte]ringKey)}
	r.failLog.Interval = time.Minute
	r.backLog.Interval = time.Minute
	return r
}

// Len returns the number of keys the ring holds.
func (r *KeyRing) Len() int { return int(r.count.Load()) }

// MaxPerTenant returns how many live keys a tenant may have.
func (r *KeyRing) MaxPerTenant() int { return r.opts.MaxPerTenant }

// lookup returns the tenant of the key whose SHA-256 is sum, if the ring
// holds it live now and trusts what it holds. It reads the clock only
// for a key it holds.
func (r *KeyRing) lookup(sum *[sha256.Size]byte) (domain.TenantID, bool) {
	if r.count.Load() == 0 {
		return "", false
	}
	r.mu.RLock()
	k, ok := r.byHash[*sum]
	r.mu.RUnlock()
	if !ok {
		return "", false
	}
	now := time.Now()
	if (k.expires != 0 && now.UnixNano() >= k.expires) || !r.trusted(now) {
		return "", false
	}
	return k.tenant, true
}

// trusted reports whether the ring's keys may resolve at now: its last
// read of the store started less than Trust ago.
func (r *KeyRing) trusted(now time.Time) bool {
	if r.opts.Trust == 0 {
		return true
	}
	c := r.confirmed.Load()
	return c != 0 && int64(now.Sub(r.base))-c < int64(r.opts.Trust)
}

// Run reads the store's changes every Interval, and sweeps expired keys
// every minute, until ctx ends.
func (r *KeyRing) Run(ctx context.Context) {
	tick := time.NewTicker(r.opts.Interval)
	defer tick.Stop()
	lastSweep := time.Now()
	for {
		_ = r.Sync(ctx)
		if time.Since(lastSweep) >= time.Minute {
			r.sweep(time.Now())
			lastSweep = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sync brings the ring up to date with the store: its changes since the
// last read, or every key on the first read and whenever the store no
// longer holds the changes since (its log trimmed, or the store started
// afresh).
func (r *KeyRing) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	start := int64(time.Since(r.base))
	err := r.catchUp(ctx)
	if r.opts.OnRead != nil {
		r.opts.OnRead(err, r.Len())
	}
	if err != nil {
		r.failing.Store(true)
		r.failLog.Do(func(n int64) {
			r.opts.Log.Warn("keys: the key store does not answer; runtime API keys stop resolving once it has not answered for a while",
				"trust", r.opts.Trust.String(), "err", err, "failures_since_last_line", n)
		})
		return err
	}
	r.confirmed.Store(start)
	if r.failing.Swap(false) {
		r.backLog.Do(func(n int64) {
			r.opts.Log.Info("keys: the key store answers again", "recoveries_since_last_line", n)
		})
	}
	return nil
}

// catchUp reads the store's changes into the ring. It requires r.syncMu
// held.
func (r *KeyRing) catchUp(ctx context.Context) error {
	if !r.loaded {
		if err := r.reload(ctx); err != nil {
			return err
		}
	}
	for {
		ch, err := r.opts.Store.Changes(ctx, r.cursor, syncBatch, time.Now())
		if err != nil {
			return err
		}
		if ch.Gap {
			if err := r.reload(ctx); err != nil {
				return err
			}
			continue
		}
		r.apply(ch.Keys, time.Now())
		r.cursor = ch.Cursor
		if len(ch.Keys) < syncBatch {
			return nil
		}
	}
}

// reload reads every key of the store into a new map, which replaces the
// ring's. It requires r.syncMu held.
func (r *KeyRing) reload(ctx context.Context) error {
	now := time.Now()
	fresh := make(map[[sha256.Size]byte]ringKey, r.Len())
	cur, err := r.opts.Store.Load(ctx, func(k ports.APIKey) {
		if k.Live(now) {
			fresh[k.Hash] = ringKeyOf(k)
		}
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.byHash = fresh
	r.mu.Unlock()
	r.count.Store(int64(len(fresh)))
	r.expiring.Store(int64(len(fresh)))
	r.cursor, r.loaded = cur, true
	return nil
}

// apply makes changes, in order, to the ring.
func (r *KeyRing) apply(changes []ports.APIKey, now time.Time) {
	if len(changes) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range changes {
		if !k.Live(now) {
			delete(r.byHash, k.Hash)
			continue
		}
		r.byHash[k.Hash] = ringKeyOf(k)
		if !k.ExpiresAt.IsZero() {
			r.expiring.Add(1)
		}
	}
	r.count.Store(int64(len(r.byHash)))
}

// sweep drops the keys expired at now.
func (r *KeyRing) sweep(now time.Time) {
	if r.expiring.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	left := int64(0)
	for h, k := range r.byHash {
		switch {
		case k.expires == 0:
		case now.UnixNano() >= k.expires:
			delete(r.byHash, h)
		default:
			left++
		}
	}
	r.expiring.Store(left)
	r.count.Store(int64(len(r.byHash)))
}

func ringKeyOf(k ports.APIKey) ringKey {
	rk := ringKey{tenant: k.Tenant}
	if !k.ExpiresAt.IsZero() {
		rk.expires = k.ExpiresAt.UnixNano()
	}
	return rk
}

// issue creates a key for tenant, valid for expiresIn (0: no expiry),
// and returns it, the only time it is ever seen, with its record.
func (r *KeyRing) issue(ctx context.Context, tenant domain.TenantID, expiresIn time.Duration) (string, ports.APIKey, error) {
	if expiresIn < 0 || expiresIn > MaxKeyLifetime {
		return "", ports.APIKey{}, ErrKeyLifetime
	}
	var secret [keyRandomBytes]byte
	var id [8]byte
	now := time.Now().Truncate(time.Millisecond)
	var err error
	for range 3 { // a repeated id (64 random bits) is all but impossible
		_, _ = rand.Read(secret[:]) // never fails (crypto/rand)
		_, _ = rand.Read(id[:])
		key := KeyPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
		rec := ports.APIKey{
			ID:        "key_" + hex.EncodeToString(id[:]),
			Tenant:    tenant,
			Hash:      sha256.Sum256([]byte(key)),
			Prefix:    key[:keyShown],
			CreatedAt: now,
		}
		if expiresIn > 0 {
			rec.ExpiresAt = now.Add(expiresIn)
		}
		_, err = r.write(func() (ports.APIKey, error) {
			return rec, r.opts.Store.Create(ctx, rec, r.opts.MaxPerTenant, now)
		}, now)
		if errors.Is(err, ports.ErrKeyExists) {
			continue
		}
		if err != nil {
			return "", ports.APIKey{}, err
		}
		return key, rec, nil
	}
	return "", ports.APIKey{}, err
}

// revoke ends tenant's key id after grace (0: now).
func (r *KeyRing) revoke(ctx context.Context, tenant domain.TenantID, id string, grace time.Duration) (ports.APIKey, error) {
	if grace < 0 || grace > MaxKeyGrace {
		return ports.APIKey{}, ErrKeyGrace
	}
	now := time.Now().Truncate(time.Millisecond)
	return r.write(func() (ports.APIKey, error) {
		return r.opts.Store.Revoke(ctx, tenant, id, now.Add(grace), now)
	}, now)
}

// write makes a change to the store with do and, when it is made,
// applies the key do returns, as it then stands, to the ring: this
// replica sees its own change at once. No read of the store runs
// meanwhile, whose older state could undo it until the next.
func (r *KeyRing) write(do func() (ports.APIKey, error), now time.Time) (ports.APIKey, error) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	k, err := do()
	if err != nil {
		return ports.APIKey{}, err
	}
	r.apply([]ports.APIKey{k}, now)
	return k, nil
}

// list returns tenant's live keys.
func (r *KeyRing) list(ctx context.Context, tenant domain.TenantID) ([]ports.APIKey, error) {
	return r.opts.Store.List(ctx, tenant, time.Now())
}
