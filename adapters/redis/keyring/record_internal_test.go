package keyring

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ports"
)

// TestRecordRoundTrip: a key's record decodes to the key, times to the
// millisecond, an expiry of 0 as none, and removed as removed.
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 123_000_000, time.UTC)
	for _, k := range []ports.APIKey{
		{ID: "key_0123456789abcdef", Tenant: "acme", Hash: sha256.Sum256([]byte("tg_x")), Prefix: "tg_x-_", CreatedAt: t0},
		{ID: "key_1", Tenant: "a.b_c-d", Hash: sha256.Sum256([]byte("tg_y")), Prefix: "tg_abc", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Removed: true},
	} {
		got, err := decode(encode(k))
		if err != nil || got != k {
			t.Errorf("decode(encode(%+v)) = %+v, %v", k, got, err)
		}
	}
}

// TestRecordRefused: what is not a record the store writes is an error,
// never a key.
func TestRecordRefused(t *testing.T) {
	t.Parallel()
	hash := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, rec := range []string{
		"",
		"key_1|acme|" + hash + "|tg_abc|1|0",     // a field short
		"key_1|acme|" + hash + "|tg_abc|1|0|0|x", // a field more
		"key_1|acme|" + hash[:62] + "|tg_abc|1|0|0",  // a short digest
		"key_1|acme|" + hash[:63] + "z|tg_abc|1|0|0", // not hex
		"key_1|a b|" + hash + "|tg_abc|1|0|0",        // not a tenant id
		"key_1|acme|" + hash + "|tg_abc|soon|0|0",    // not a time
		"key_1|acme|" + hash + "|tg_abc|1|never|0",   // not a time
	} {
		if _, err := decode(rec); !errors.Is(err, errRecord) {
			t.Errorf("decode(%q) = %v, want errRecord", rec, err)
		}
	}
}
