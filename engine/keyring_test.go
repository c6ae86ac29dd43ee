package engine_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/ports"
)

// keyEngine returns an engine over rec with ring, and with the tenants
// acme and globex in a tenants file when withFile.
func keyEngine(t *testing.T, rec *recorder, ring *engine.KeyRing, withFile bool, anon engine.Anonymous) *engine.Engine {
	t.Helper()
	snap := &engine.Snapshot{Policy: examplePolicy(t)}
	if withFile {
		snap.Tenants = engine.NewDirectory(
			[]engine.Tenant{{ID: "acme", Rules: map[string]domain.Rule{"exports": {Limit: 50, Window: hour}}}, {ID: "globex"}},
			[][]string{{"k-acme"}, {"k-globex"}})
	}
	return engine.New(snap, engine.Options{Limiter: rec, Keys: keys.Layout{}, KeyRing: ring, Anonymous: anon})
}

// tenantOf returns the tenant e resolves key to, presented as X-API-Key.
func tenantOf(t *testing.T, e *engine.Engine, key string) domain.TenantID {
	t.Helper()
	res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/v1/export", Credentials: engine.Credentials{APIKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Tenant
}

// TestIssueKey: a key is tg_ and 192 random bits, stored as its SHA-256
// with its first 6 characters; it names its tenant (with the tenants
// file's rules) in X-API-Key or as a bearer token, and stops at once on
// this replica when revoked.
func TestIssueKey(t *testing.T) {
	t.Parallel()
	for _, withFile := range []bool{true, false} {
		rec := &recorder{}
		store := memory.NewAPIKeys()
		ring := engine.NewKeyRing(engine.KeyRingOptions{Store: store})
		e := keyEngine(t, rec, ring, withFile, engine.AnonymousShared)
		ctx := t.Context()
		if e.UsesAPIKeys() != withFile {
			t.Errorf("file %v: UsesAPIKeys before any key = %v", withFile, e.UsesAPIKeys())
		}
		key, k, err := e.IssueKey(ctx, "acme", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, "tg_") || len(key) != 3+32 || k.Hash != sha256.Sum256([]byte(key)) || k.Prefix != key[:6] ||
			k.Tenant != "acme" || !k.ExpiresAt.IsZero() || !strings.HasPrefix(k.ID, "key_") {
			t.Fatalf("IssueKey = %q, %+v: want tg_ and 32 characters, its SHA-256 and first 6 characters", key, k)
		}
		if other, _, _ := e.IssueKey(ctx, "acme", time.Hour); other == key {
			t.Fatal("two keys alike")
		}
		if got := tenantOf(t, e, key); got != "acme" {
			t.Errorf("file %v: the key resolves to %s, want acme", withFile, got)
		}
		res, _ := e.Decide(ctx, engine.Described{Method: "GET", Path: "/v1/export", Credentials: engine.Credentials{Bearer: key, Header: "globex"}})
		if res.Tenant != "acme" {
			t.Errorf("file %v: as a bearer token, the key resolves to %s, want acme", withFile, res.Tenant)
		}
		if withFile && res.Limits[1].Rule.Limit != 50 {
			t.Errorf("the key's tenant has exports %d, want the tenants file's 50", res.Limits[1].Rule.Limit)
		}
		if !e.UsesAPIKeys() || !e.KnownKey(key) || e.KnownKey(key+"x") {
			t.Errorf("file %v: UsesAPIKeys %v, KnownKey %v, want both once a key is issued", withFile, e.UsesAPIKeys(), e.KnownKey(key))
		}
		list, err := e.Keys(ctx, "acme")
		if err != nil || len(list) != 2 || list[0].ID != k.ID {
			t.Fatalf("Keys(acme) = %+v, %v, want 2, %s first", list, err, k.ID)
		}
		if _, err := e.RevokeKey(ctx, "acme", k.ID, 0); err != nil {
			t.Fatal(err)
		}
		want := domain.Unknown
		if !withFile {
			want = "unknown"
		}
		if got := tenantOf(t, e, key); got != want {
			t.Errorf("file %v: a revoked key resolves to %s, want %s", withFile, got, want)
		}
		if e.KnownKey(key) {
			t.Errorf("file %v: a revoked key is known", withFile)
		}
	}
}

// TestKeyBadInput: every bad call is refused with its own error, and
// changes nothing.
func TestKeyBadInput(t *testing.T) {
	t.Parallel()
	ring := engine.NewKeyRing(engine.KeyRingOptions{Store: memory.NewAPIKeys(), MaxPerTenant: 3})
	e := keyEngine(t, &recorder{}, ring, true, engine.AnonymousShared)
	ctx := t.Context()
	_, k, err := e.IssueKey(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		do   func() error
		want error
	}{
		{"an invalid tenant id", func() error { _, _, err := e.IssueKey(ctx, "a/b", 0); return err }, domain.ErrInvalidTenant},
		{"the unknown tenant", func() error { _, _, err := e.IssueKey(ctx, domain.Unknown, 0); return err }, domain.ErrInvalidTenant},
		{"a tenant not in the file", func() error { _, _, err := e.IssueKey(ctx, "initech", 0); return err }, engine.ErrNoTenant},
		{"a negative expiry", func() error { _, _, err := e.IssueKey(ctx, "acme", -time.Second); return err }, engine.ErrKeyLifetime},
		{"an expiry past the bound", func() error { _, _, err := e.IssueKey(ctx, "acme", engine.MaxKeyLifetime+1); return err }, engine.ErrKeyLifetime},
		{"list of an invalid tenant", func() error { _, err := e.Keys(ctx, "a b"); return err }, domain.ErrInvalidTenant},
		{"a key id that does not exist", func() error { _, err := e.RevokeKey(ctx, "acme", "key_nope", 0); return err }, ports.ErrNoAPIKey},
		{"another tenant's key", func() error { _, err := e.RevokeKey(ctx, "globex", k.ID, 0); return err }, ports.ErrNoAPIKey},
		{"a grace past a day", func() error { _, err := e.RevokeKey(ctx, "acme", k.ID, engine.MaxKeyGrace+1); return err }, engine.ErrKeyGrace},
		{"a negative grace", func() error { _, err := e.RevokeKey(ctx, "acme", k.ID, -1); return err }, engine.ErrKeyGrace},
	} {
		if err := tt.do(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	for range 2 {
		if _, _, err := e.IssueKey(ctx, "acme", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.IssueKey(ctx, "acme", 0); !errors.Is(err, ports.ErrTooManyKeys) {
		t.Errorf("a fourth key with a bound of 3: %v, want ErrTooManyKeys", err)
	}
	if list, _ := e.Keys(ctx, "acme"); len(list) != 3 || list[0].ID != k.ID {
		t.Errorf("Keys(acme) = %d keys, want the 3 issued", len(list))
	}
	noRing := keyEngine(t, &recorder{}, nil, true, engine.AnonymousShared)
	if _, _, err := noRing.IssueKey(ctx, "acme", 0); !errors.Is(err, engine.ErrNoKeyRing) {
		t.Errorf("IssueKey without a ring: %v, want ErrNoKeyRing", err)
	}
}

// TestKeyRingReplicas: two rings on one store are two replicas; each
// sees the other's keys, revocations and grace once it has read the
// store's changes.
func TestKeyRingReplicas(t *testing.T) {
	t.Parallel()
	store := memory.NewAPIKeys()
	a := keyEngine(t, &recorder{}, engine.NewKeyRing(engine.KeyRingOptions{Store: store}), false, engine.AnonymousShared)
	ringB := engine.NewKeyRing(engine.KeyRingOptions{Store: store})
	b := keyEngine(t, &recorder{}, ringB, false, engine.AnonymousShared)
	ctx := t.Context()
	key, k, err := a.IssueKey(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, b, key); got != domain.Unknown {
		t.Fatalf("replica b resolves a key before reading the store: %s", got)
	}
	if err := ringB.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, b, key); got != "acme" {
		t.Fatalf("replica b after a read: %s, want acme", got)
	}
	if _, err := a.RevokeKey(ctx, "acme", k.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = ringB.Sync(ctx)
	if got := tenantOf(t, b, key); got != "acme" {
		t.Fatalf("a key in its grace on replica b: %s, want acme", got)
	}
	if _, err := b.RevokeKey(ctx, "acme", k.ID, 0); err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, b, key); got != domain.Unknown {
		t.Errorf("the revoking replica resolves the key: %s", got)
	}
	if err := a.KeyRing().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tenantOf(t, a, key); got != domain.Unknown {
		t.Errorf("replica a resolves a key revoked on b after a read: %s", got)
	}
}

// flaky is a key store that fails while down is set, and reports a gap
// once when gap is set.
type flaky struct {
	ports.APIKeys
	down, gap atomic.Bool
}

var errDown = errors.New("store down")

func (f *flaky) Changes(ctx context.Context, since ports.KeyCursor, max int, now time.Time) (ports.KeyChanges, error) {
	if f.down.Load() {
		return ports.KeyChanges{}, errDown
	}
	if f.gap.Swap(false) {
		return ports.KeyChanges{Cursor: since, Gap: true}, nil
	}
	return f.APIKeys.Changes(ctx, since, max, now)
}

func (f *flaky) Load(ctx context.Context, each func(ports.APIKey)) (ports.KeyCursor, error) {
	if f.down.Load() {
		return ports.KeyCursor{}, errDown
	}
	return f.APIKeys.Load(ctx, each)
}

// TestKeyRingTrust: a replica that cannot read the store stops
// resolving its runtime keys once Trust has passed since its last read
// began, and resolves them again after a read; the tenants file's keys
// resolve throughout.
func TestKeyRingTrust(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &flaky{APIKeys: memory.NewAPIKeys()}
		var failures atomic.Int64
		ring := engine.NewKeyRing(engine.KeyRingOptions{Store: store, Trust: time.Second, OnRead: func(err error, _ int) {
			if err != nil {
				failures.Add(1)
			}
		}})
		e := keyEngine(t, &recorder{}, ring, true, engine.AnonymousShared)
		ctx := t.Context()
		key, _, err := e.IssueKey(ctx, "globex", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := tenantOf(t, e, key); got != domain.Unknown {
			t.Fatalf("before the first read the ring trusts nothing; resolved %s", got)
		}
		if err := ring.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := tenantOf(t, e, key); got != "globex" {
			t.Fatalf("after a read: %s, want globex", got)
		}
		store.down.Store(true)
		time.Sleep(900 * time.Millisecond)
		if err := ring.Sync(ctx); !errors.Is(err, errDown) || failures.Load() != 1 {
			t.Fatalf("Sync with the store down = %v (%d failures), want errDown", err, failures.Load())
		}
		if got := tenantOf(t, e, key); got != "globex" {
			t.Errorf("0.9s after the last read: %s, want globex", got)
		}
		time.Sleep(100 * time.Millisecond)
		if got := tenantOf(t, e, key); got != domain.Unknown {
			t.Errorf("1s after the last read, the store down: %s, want unknown", got)
		}
		if got := tenantOf(t, e, "k-acme"); got != "acme" {
			t.Errorf("a tenants file key with the store down: %s, want acme", got)
		}
		store.down.Store(false)
		store.gap.Store(true) // and the store lost track: the ring reads every key again
		if err := ring.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := tenantOf(t, e, key); got != "globex" {
			t.Errorf("after the store is back: %s, want globex", got)
		}
	})
}

// TestKeyRingRunAndExpiry: Run reads the store every Interval, so a key
// issued through another ring resolves within it; a key expires on its
// own, without a read.
func TestKeyRingRunAndExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewAPIKeys()
		issuer := keyEngine(t, &recorder{}, engine.NewKeyRing(engine.KeyRingOptions{Store: store}), false, engine.AnonymousShared)
		ring := engine.NewKeyRing(engine.KeyRingOptions{Store: store, Trust: time.Second, Interval: 100 * time.Millisecond})
		e := keyEngine(t, &recorder{}, ring, false, engine.AnonymousShared)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go ring.Run(ctx)
		synctest.Wait()
		key, _, err := issuer.IssueKey(ctx, "acme", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		if got := tenantOf(t, e, key); got != "acme" {
			t.Errorf("150ms after it was issued elsewhere: %s, want acme", got)
		}
		time.Sleep(5 * time.Second)
		if got := tenantOf(t, e, key); got != domain.Unknown {
			t.Errorf("after its expiry: %s, want unknown", got)
		}
		cancel()
		synctest.Wait()
	})
}

// TestDecideAnonymousReject: with AnonymousReject a request that names no
// tenant is Rejected, on every route, and never reaches the limiter;
// one that names a tenant is decided as always.
func TestDecideAnonymousReject(t *testing.T) {
	t.Parallel()
	for _, withFile := range []bool{true, false} {
		rec := &recorder{}
		ring := engine.NewKeyRing(engine.KeyRingOptions{Store: memory.NewAPIKeys()})
		e := keyEngine(t, rec, ring, withFile, engine.AnonymousReject)
		key, _, err := e.IssueKey(t.Context(), "acme", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			creds    engine.Credentials
			path     string
			rejected bool
		}{
			{engine.Credentials{}, "/v1/export", true},
			{engine.Credentials{}, "/status", true},
			{engine.Credentials{APIKey: "tg_nope"}, "/v1/export", true},
			{engine.Credentials{Header: "acme"}, "/v1/export", withFile},
			{engine.Credentials{Header: "unknown"}, "/v1/export", true},
			{engine.Credentials{APIKey: key}, "/v1/export", false},
			{engine.Credentials{Bearer: key}, "/status", false},
		} {
			n := len(rec.reqs)
			res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: tt.path, Credentials: tt.creds})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rejected != tt.rejected {
				t.Errorf("file %v, %+v on %s: Rejected %v, want %v", withFile, tt.creds, tt.path, res.Rejected, tt.rejected)
			}
			if tt.rejected && (len(rec.reqs) != n || res.Metered) {
				t.Errorf("file %v, %+v: a rejected request reached the limiter", withFile, tt.creds)
			}
		}
	}
}
