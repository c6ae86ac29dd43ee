package integration

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/keyring"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// TestAPIKeysConformance: the Redis store of runtime API keys passes the
// conformance suite on one Redis and on a Cluster, and every key it
// writes has a TTL of at most keyring.TTL.
func TestAPIKeysConformance(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name string
		rdb  func(t *testing.T) goredis.UniversalClient
	}{
		{"redis", func(t *testing.T) goredis.UniversalClient { return startRedis(t).Client }},
		{"cluster", func(t *testing.T) goredis.UniversalClient { return sharedClusterFor(t).Client }},
	} {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			rdb := target.rdb(t)
			var prefixes []string
			portstest.TestAPIKeys(t, func(t *testing.T) ports.APIKeys {
				p := uniquePrefix(t)
				prefixes = append(prefixes, p)
				return keyring.New(rdb, p)
			})
			n := 0
			for _, p := range prefixes {
				n += checkTTLs(t, rdb, p+"*", keyring.TTL)
			}
			if n == 0 {
				t.Error("the suite left no key to check")
			}
		})
	}
}

// TestAPIKeysLogTrimmed: a reader further behind than keyring.LogLen
// changes is told of the gap; one within it reads them in order.
func TestAPIKeysLogTrimmed(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).Client
	s := keyring.New(rdb, uniquePrefix(t))
	ctx := t.Context()
	now := time.Now()
	first := ports.APIKey{ID: "key_first", Tenant: "acme", Prefix: "tg_abc", CreatedAt: now}
	if err := s.Create(ctx, first, 10, now); err != nil {
		t.Fatal(err)
	}
	start, err := s.Load(ctx, func(ports.APIKey) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, "acme", "key_first", now.Add(3*time.Hour), now); err != nil {
		t.Fatal(err)
	}
	after, err := s.Changes(ctx, start, 10, now)
	if err != nil || after.Gap || len(after.Keys) != 1 {
		t.Fatalf("Changes after one revocation = %+v, %v", after, err)
	}
	for range keyring.LogLen / 2 {
		if _, err := s.Revoke(ctx, "acme", "key_first", now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Revoke(ctx, "acme", "key_first", now.Add(2*time.Hour), now); err != nil {
			t.Fatal(err)
		}
	}
	if ch, err := s.Changes(ctx, start, 10, now); err != nil || !ch.Gap {
		t.Errorf("Changes from %d changes back = gap %v, %v; want a gap", keyring.LogLen+1, ch.Gap, err)
	}
	ch, err := s.Changes(ctx, after.Cursor, 10, now)
	if err != nil || ch.Gap || len(ch.Keys) != 10 {
		t.Errorf("Changes from %d changes back = %d changes, gap %v, %v; want 10", keyring.LogLen, len(ch.Keys), ch.Gap, err)
	}
}

// TestAPIKeysSwept: a read of the changes removes the expired keys of
// the tenants whose sets it renews (a tenant of one expired key: the
// tenant too), and leaves the live ones.
func TestAPIKeysSwept(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).Client
	prefix := uniquePrefix(t)
	s := keyring.New(rdb, prefix)
	ctx := t.Context()
	now := time.Now()
	for _, k := range []ports.APIKey{
		{ID: "key_gone", Tenant: "acme", Prefix: "tg_abc", CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{ID: "key_kept", Tenant: "acme", Prefix: "tg_abc", CreatedAt: now},
		{ID: "key_alone", Tenant: "globex", Prefix: "tg_abc", CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
	} {
		if err := s.Create(ctx, k, 10, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Changes(ctx, ports.KeyCursor{}, 10, now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	all := prefix + "{apikeys}:all"
	if got := rdb.HKeys(ctx, all).Val(); len(got) != 1 || got[0] != "key_kept" {
		t.Errorf("records after the read: %v, want [key_kept]", got)
	}
	if got := rdb.SMembers(ctx, prefix+"{apikeys}:tenants").Val(); len(got) != 1 || got[0] != "acme" {
		t.Errorf("tenants after the read: %v, want [acme]", got)
	}
	if n := rdb.Exists(ctx, prefix+"{apikeys}:t:globex").Val(); n != 0 {
		t.Error("globex's set outlived its one key")
	}
	checkTTLs(t, rdb, prefix+"*", keyring.TTL)
}
