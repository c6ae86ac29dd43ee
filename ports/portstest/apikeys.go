package portstest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestAPIKeys is the conformance suite of a store of runtime API keys:
// newStore returns an empty store (one per subtest).
func TestAPIKeys(t *testing.T, newStore func(t *testing.T) ports.APIKeys) {
	t.Helper()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	key := func(tenant domain.TenantID, n int, expires time.Time) ports.APIKey {
		return ports.APIKey{
			ID:        fmt.Sprintf("key_%s_%d", tenant, n),
			Tenant:    tenant,
			Hash:      sha256.Sum256(fmt.Appendf(nil, "tg_%s_%d", tenant, n)),
			Prefix:    "tg_abc",
			CreatedAt: t0.Add(time.Duration(n) * time.Millisecond),
			ExpiresAt: expires,
		}
	}
	ids := func(ks []ports.APIKey) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.ID
		}
		return out
	}

	t.Run("create, list, revoke", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		a0, a1, b0 := key("acme", 0, time.Time{}), key("acme", 1, t0.Add(time.Hour)), key("globex", 0, time.Time{})
		for _, k := range []ports.APIKey{a0, a1, b0} {
			if err := s.Create(ctx, k, 10, t0); err != nil {
				t.Fatalf("Create(%s) = %v, want nil", k.ID, err)
			}
		}
		got, err := s.List(ctx, "acme", t0)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := fmt.Sprint(ids(got)), fmt.Sprint([]string{a0.ID, a1.ID}); g != w {
			t.Fatalf("List(acme) = %s, want %s, oldest first", g, w)
		}
		for i, want := range []ports.APIKey{a0, a1} {
			if !sameKey(got[i], want) {
				t.Errorf("List(acme)[%d] = %+v, want %+v", i, got[i], want)
			}
		}
		if got, _ := s.List(ctx, "initech", t0); len(got) != 0 {
			t.Errorf("List(initech) = %v, want none", ids(got))
		}
		if _, err := s.Revoke(ctx, "globex", a0.ID, t0, t0); !errors.Is(err, ports.ErrNoAPIKey) {
			t.Errorf("Revoke(globex, %s: acme's) = %v, want ErrNoAPIKey", a0.ID, err)
		}
		if _, err := s.Revoke(ctx, "acme", "key_nope", t0, t0); !errors.Is(err, ports.ErrNoAPIKey) {
			t.Errorf("Revoke(acme, key_nope) = %v, want ErrNoAPIKey", err)
		}
		r, err := s.Revoke(ctx, "acme", a0.ID, t0, t0)
		if err != nil || !r.Removed || r.Hash != a0.Hash || r.Tenant != "acme" {
			t.Fatalf("Revoke(acme, %s) = %+v, %v, want it removed", a0.ID, r, err)
		}
		if _, err := s.Revoke(ctx, "acme", a0.ID, t0, t0); !errors.Is(err, ports.ErrNoAPIKey) {
			t.Errorf("Revoke(acme, %s) again = %v, want ErrNoAPIKey", a0.ID, err)
		}
		if got, _ := s.List(ctx, "acme", t0); fmt.Sprint(ids(got)) != fmt.Sprint([]string{a1.ID}) {
			t.Errorf("List(acme) after the revocation = %v, want [%s]", ids(got), a1.ID)
		}
		if err := s.Create(ctx, b0, 10, t0); !errors.Is(err, ports.ErrKeyExists) {
			t.Errorf("Create(%s) again = %v, want ErrKeyExists", b0.ID, err)
		}
		// The clock only moves forward: from here on, a1 has expired.
		if got, _ := s.List(ctx, "acme", t0.Add(time.Hour)); len(got) != 0 {
			t.Errorf("List(acme) once %s expired = %v, want none", a1.ID, ids(got))
		}
	})

	t.Run("revoke with grace", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		k := key("acme", 0, t0.Add(time.Hour))
		if err := s.Create(ctx, k, 10, t0); err != nil {
			t.Fatal(err)
		}
		// A grace past the key's own expiry keeps that expiry.
		r, err := s.Revoke(ctx, "acme", k.ID, t0.Add(2*time.Hour), t0)
		if err != nil || r.Removed || !r.ExpiresAt.Equal(k.ExpiresAt) {
			t.Fatalf("Revoke(grace past its expiry) = %+v, %v, want it kept until %v", r, err, k.ExpiresAt)
		}
		r, err = s.Revoke(ctx, "acme", k.ID, t0.Add(time.Minute), t0)
		if err != nil || r.Removed || !r.ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("Revoke(grace 1m) = %+v, %v, want it live until t0+1m", r, err)
		}
		got, _ := s.List(ctx, "acme", t0.Add(59*time.Second))
		if len(got) != 1 || !got[0].ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("List at t0+59s = %+v, want the key expiring at t0+1m", got)
		}
		if got, _ := s.List(ctx, "acme", t0.Add(time.Minute)); len(got) != 0 {
			t.Errorf("List at t0+1m = %v, want none", ids(got))
		}
		if _, err := s.Revoke(ctx, "acme", k.ID, t0.Add(time.Minute), t0.Add(time.Minute)); !errors.Is(err, ports.ErrNoAPIKey) {
			t.Errorf("Revoke of an expired key = %v, want ErrNoAPIKey", err)
		}
	})

	t.Run("bound per tenant", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		for n := range 3 {
			if err := s.Create(ctx, key("acme", n, t0.Add(time.Duration(n+1)*time.Minute)), 3, t0); err != nil {
				t.Fatalf("Create %d = %v", n, err)
			}
		}
		if err := s.Create(ctx, key("acme", 3, time.Time{}), 3, t0); !errors.Is(err, ports.ErrTooManyKeys) {
			t.Fatalf("Create past the bound = %v, want ErrTooManyKeys", err)
		}
		if err := s.Create(ctx, key("globex", 0, time.Time{}), 3, t0); err != nil {
			t.Fatalf("Create for another tenant = %v, want nil: the bound is per tenant", err)
		}
		// An expired key no longer counts.
		if err := s.Create(ctx, key("acme", 3, time.Time{}), 3, t0.Add(time.Minute)); err != nil {
			t.Fatalf("Create once a key expired = %v, want nil", err)
		}
		if got, _ := s.List(ctx, "acme", t0.Add(time.Minute)); len(got) != 3 {
			t.Errorf("List(acme) = %v, want 3 keys", ids(got))
		}
	})

	t.Run("changes and load", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		a0 := key("acme", 0, time.Time{})
		if err := s.Create(ctx, a0, 10, t0); err != nil {
			t.Fatal(err)
		}
		var loaded []ports.APIKey
		cur, err := s.Load(ctx, func(k ports.APIKey) { loaded = append(loaded, k) })
		if err != nil || len(loaded) != 1 || !sameKey(loaded[0], a0) {
			t.Fatalf("Load = %+v, %v, want [%s]", loaded, err, a0.ID)
		}
		ch, err := s.Changes(ctx, cur, 10, t0)
		if err != nil || ch.Gap || len(ch.Keys) != 0 || ch.Cursor != cur {
			t.Fatalf("Changes(Load's cursor) = %+v, %v, want none, the same cursor", ch, err)
		}
		if ch, _ := s.Changes(ctx, ports.KeyCursor{Epoch: cur.Epoch + "x", Seq: cur.Seq}, 10, t0); !ch.Gap {
			t.Errorf("Changes(another epoch) = %+v, want a gap", ch)
		}
		a1 := key("acme", 1, time.Time{})
		if err := s.Create(ctx, a1, 10, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Revoke(ctx, "acme", a0.ID, t0, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Revoke(ctx, "acme", a1.ID, t0.Add(time.Minute), t0); err != nil {
			t.Fatal(err)
		}
		first, err := s.Changes(ctx, cur, 2, t0)
		if err != nil || first.Gap || len(first.Keys) != 2 {
			t.Fatalf("Changes(max 2) = %+v, %v, want 2 changes", first, err)
		}
		if k := first.Keys[0]; k.ID != a1.ID || !k.Live(t0) {
			t.Errorf("change 1 = %+v, want %s created", k, a1.ID)
		}
		if k := first.Keys[1]; k.ID != a0.ID || !k.Removed || k.Hash != a0.Hash {
			t.Errorf("change 2 = %+v, want %s removed", k, a0.ID)
		}
		rest, err := s.Changes(ctx, first.Cursor, 10, t0)
		if err != nil || rest.Gap || len(rest.Keys) != 1 {
			t.Fatalf("Changes(after 2) = %+v, %v, want 1 change", rest, err)
		}
		if k := rest.Keys[0]; k.ID != a1.ID || k.Removed || !k.ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("change 3 = %+v, want %s expiring at t0+1m", k, a1.ID)
		}
		if end, _ := s.Changes(ctx, rest.Cursor, 10, t0); end.Gap || len(end.Keys) != 0 || end.Cursor != rest.Cursor {
			t.Errorf("Changes(at the end) = %+v, want none", end)
		}
		loaded = nil
		if _, err := s.Load(ctx, func(k ports.APIKey) { loaded = append(loaded, k) }); err != nil || len(loaded) != 1 || loaded[0].ID != a1.ID {
			t.Errorf("Load after the revocation = %+v, %v, want [%s]", loaded, err, a1.ID)
		}
	})
}

// sameKey reports whether a and b are the same key, times to the
// millisecond (what a store keeps).
func sameKey(a, b ports.APIKey) bool {
	return a.ID == b.ID && a.Tenant == b.Tenant && a.Hash == b.Hash && a.Prefix == b.Prefix && a.Removed == b.Removed &&
		a.CreatedAt.UnixMilli() == b.CreatedAt.UnixMilli() && a.ExpiresAt.UnixMilli() == b.ExpiresAt.UnixMilli() &&
		a.ExpiresAt.IsZero() == b.ExpiresAt.IsZero()
}
