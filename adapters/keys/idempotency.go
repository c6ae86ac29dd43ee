package keys

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/tollgate/tollgate/domain"
)

// KeyIdempotency is the part of a remembered Idempotency-Key's key
// ([Idempotency]) after the tenant. It holds '_', as algorithm names do
// and limit names never do, and names no algorithm: no limit's key is
// ever one of its keys.
const KeyIdempotency = "idempotency_key"

// Idempotency returns the key under which a store remembers tenant t's
// call with Idempotency-Key key: "<prefix>{<t>}:idempotency_key:<hex>",
// where hex is key's SHA-256, so that no caller's string is written to
// the store as it is and any string makes a key of one length. It lives
// in the tenant's slot.
func Idempotency(prefix string, t domain.TenantID, key string) string {
	sum := sha256.Sum256([]byte(key))
	return TenantKeys(prefix, t) + ":" + KeyIdempotency + ":" + hex.EncodeToString(sum[:])
}
