package memory_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	m := memory.NewIdempotency(func() time.Time { return now })
	ctx := t.Context()
	first, answer, err := m.Begin(ctx, "acme", "k", time.Hour)
	if !first || answer != nil || err != nil {
		t.Fatalf("a new key: %v %q %v, want first", first, answer, err)
	}
	if first, answer, _ := m.Begin(ctx, "acme", "k", time.Hour); first || answer != nil {
		t.Fatalf("while the first runs: %v %q, want neither first nor an answer", first, answer)
	}
	if first, _, _ := m.Begin(ctx, "initech", "k", time.Hour); !first {
		t.Fatal("another tenant's key of the same name is not its own")
	}
	if err := m.Done(ctx, "acme", "k", []byte("answer"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if first, answer, _ := m.Begin(ctx, "acme", "k", time.Hour); first || string(answer) != "answer" {
		t.Fatalf("after Done: %v %q, want the answer", first, answer)
	}
	now = now.Add(time.Hour)
	if first, _, _ := m.Begin(ctx, "acme", "k", time.Hour); !first {
		t.Fatal("an expired key was not claimed afresh")
	}
	if err := m.Abandon(ctx, "acme", "k"); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := m.Begin(ctx, "acme", "k", time.Hour); !first {
		t.Fatal("an abandoned key was not claimed afresh")
	}
}

func TestIdempotencyBound(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	m := memory.NewIdempotency(func() time.Time { return now })
	for i := range memory.MaxIdempotencyKeys {
		if first, _, err := m.Begin(t.Context(), "acme", strconv.Itoa(i), time.Minute); !first || err != nil {
			t.Fatalf("key %d: %v %v", i, first, err)
		}
	}
	if _, _, err := m.Begin(t.Context(), "acme", "one more", time.Minute); !errors.Is(err, ports.ErrStoreFull) {
		t.Fatalf("past the bound: %v, want ErrStoreFull", err)
	}
	now = now.Add(time.Minute) // every key expired: room again
	if first, _, err := m.Begin(t.Context(), "acme", "one more", time.Minute); !first || err != nil {
		t.Fatalf("after expiry: %v %v", first, err)
	}
}
