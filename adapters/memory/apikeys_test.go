package memory_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	portstest.TestAPIKeys(t, func(*testing.T) ports.APIKeys { return memory.NewAPIKeys() })
}

// TestAPIKeysLogWraps: a reader within the last KeyLogLen changes reads
// them in order; one further behind is told of the gap.
func TestAPIKeysLogWraps(t *testing.T) {
	t.Parallel()
	s := memory.NewAPIKeys()
	ctx := t.Context()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	start, err := s.Load(ctx, func(ports.APIKey) {})
	if err != nil {
		t.Fatal(err)
	}
	n := memory.KeyLogLen + 10
	for i := range n {
		k := ports.APIKey{ID: fmt.Sprintf("key_%d", i), Tenant: "acme", Hash: sha256.Sum256(fmt.Append(nil, i)), CreatedAt: now}
		if err := s.Create(ctx, k, n, now); err != nil {
			t.Fatal(err)
		}
	}
	if ch, _ := s.Changes(ctx, start, 10, now); !ch.Gap {
		t.Errorf("Changes from %d changes back = %+v, want a gap", n, ch.Cursor)
	}
	behind := ports.KeyCursor{Epoch: start.Epoch, Seq: uint64(n - memory.KeyLogLen)}
	ch, err := s.Changes(ctx, behind, memory.KeyLogLen, now)
	if err != nil || ch.Gap || len(ch.Keys) != memory.KeyLogLen {
		t.Fatalf("Changes from KeyLogLen back = %d changes, gap %v, %v; want %d", len(ch.Keys), ch.Gap, err, memory.KeyLogLen)
	}
	for i, k := range ch.Keys {
		if want := fmt.Sprintf("key_%d", n-memory.KeyLogLen+i); k.ID != want {
			t.Fatalf("change %d = %s, want %s", i, k.ID, want)
		}
	}
}
