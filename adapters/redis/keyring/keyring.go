// Package keyring is the store of API keys issued at runtime on Redis
// or a Redis Cluster ([Store]), shared by every replica of one Redis.
package keyring

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TTL is the time to live of every key of the store, renewed by every
// change and by every replica's reads of the changes (ten a second): the
// keys of a Redis no replica has read for TTL vanish, and with them the
// API keys issued, whether they expire or not.
const TTL = 30 * 24 * time.Hour

// LogLen is how many changes the store keeps for [Store.Changes]: a
// replica further behind reads every key again.
const LogLen = 4096

// renewBatch is how many tenants' sets one read of the changes renews.
const renewBatch = 16

var (
	//go:embed lua/prune.lua
	pruneSrc string
	//go:embed lua/create.lua
	createSrc string
	//go:embed lua/revoke.lua
	revokeSrc string
	//go:embed lua/list.lua
	listSrc string
	//go:embed lua/poll.lua
	pollSrc string

	// prune.lua heads the scripts that prune a tenant's expired keys.
	createScript = goredis.NewScript(pruneSrc + createSrc)
	revokeScript = goredis.NewScript(revokeSrc)
	listScript   = goredis.NewScript(listSrc)
	pollScript   = goredis.NewScript(pruneSrc + pollSrc)
)

// Store is the API keys issued at runtime, on Redis: their SHA-256,
// never a key. Its keys share one hash slot (the tag {apikeys}), each
// with a TTL ([TTL]):
//
//	<prefix>{apikeys}:meta          hash: the store's epoch, its count of changes, a cursor over tenants
//	<prefix>{apikeys}:all           hash: key id → record
//	<prefix>{apikeys}:log           sorted set: the last LogLen changes, scored by their number
//	<prefix>{apikeys}:tenants       set: the tenants with keys
//	<prefix>{apikeys}:t:<tenant>    set: the tenant's key ids
//
// A record is "id|tenant|SHA-256 in hex|prefix|created ms|expires ms
// (0: never)|removed (0/1)". A key revoked without grace is removed at
// once; an expired one when its tenant's next key is created, or when
// the replicas' reads of the changes renew its tenant's set (a few
// tenants each read, all in turn), whichever comes first.
//
// Store is safe for concurrent use by multiple goroutines. It does not
// own the client.
type Store struct {
	rdb                          goredis.UniversalClient
	meta, all, log, tenants, set string // set: a tenant's set's key, less the tenant
}

var _ ports.APIKeys = (*Store)(nil)

// New returns the store of the gateways whose keys start with prefix,
// on rdb.
func New(rdb goredis.UniversalClient, prefix string) *Store {
	base := prefix + "{apikeys}:"
	return &Store{rdb: rdb, meta: base + "meta", all: base + "all", log: base + "log", tenants: base + "tenants", set: base + "t:"}
}

// keys returns the keys a change of tenant's keys touches.
func (s *Store) keys(tenant domain.TenantID) []string {
	return []string{s.meta, s.all, s.log, s.tenants, s.set + string(tenant)}
}

// Create stores k (see [ports.APIKeys]).
func (s *Store) Create(ctx context.Context, k ports.APIKey, max int, now time.Time) error {
	k.Removed = false
	res, err := createScript.Run(ctx, s.rdb, s.keys(k.Tenant), k.ID, encode(k), string(k.Tenant), max,
		now.UnixMilli(), TTL.Milliseconds(), LogLen, newEpoch()).Slice()
	if err != nil {
		return fmt.Errorf("keyring: create: %w", err)
	}
	switch res[0] {
	case int64(-1):
		return ports.ErrTooManyKeys
	case int64(-2):
		return ports.ErrKeyExists
	}
	return nil
}

// List returns tenant's live keys (see [ports.APIKeys]).
func (s *Store) List(ctx context.Context, tenant domain.TenantID, now time.Time) ([]ports.APIKey, error) {
	recs, err := listScript.Run(ctx, s.rdb, []string{s.all, s.set + string(tenant)}, TTL.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("keyring: list: %w", err)
	}
	out := make([]ports.APIKey, 0, len(recs))
	for _, r := range recs {
		k, err := decode(r)
		if err != nil {
			return nil, err
		}
		if k.Live(now) {
			out = append(out, k)
		}
	}
	sortKeys(out)
	return out, nil
}

// Revoke ends tenant's key id at at (see [ports.APIKeys]).
func (s *Store) Revoke(ctx context.Context, tenant domain.TenantID, id string, at, now time.Time) (ports.APIKey, error) {
	if strings.Contains(id, "|") {
		return ports.APIKey{}, ports.ErrNoAPIKey
	}
	res, err := revokeScript.Run(ctx, s.rdb, s.keys(tenant), id, string(tenant), at.UnixMilli(), now.UnixMilli(),
		TTL.Milliseconds(), LogLen, newEpoch()).Slice()
	if err != nil {
		return ports.APIKey{}, fmt.Errorf("keyring: revoke: %w", err)
	}
	if len(res) < 3 {
		return ports.APIKey{}, ports.ErrNoAPIKey
	}
	rec, _ := res[2].(string)
	return decode(rec)
}

// Changes returns the changes after since (see [ports.APIKeys]).
func (s *Store) Changes(ctx context.Context, since ports.KeyCursor, max int, now time.Time) (ports.KeyChanges, error) {
	res, err := pollScript.Run(ctx, s.rdb, []string{s.meta, s.all, s.log, s.tenants},
		since.Seq, max, TTL.Milliseconds(), renewBatch, s.set, now.UnixMilli()).Slice()
	if err != nil {
		return ports.KeyChanges{}, fmt.Errorf("keyring: changes: %w", err)
	}
	if len(res) < 2 {
		return ports.KeyChanges{}, errors.New("keyring: changes: a short reply")
	}
	epoch, _ := res[0].(string)
	seq, _ := res[1].(int64)
	cur := ports.KeyCursor{Epoch: epoch, Seq: uint64(seq)}
	if epoch != since.Epoch || cur.Seq < since.Seq {
		return ports.KeyChanges{Cursor: cur, Gap: true}, nil
	}
	out := ports.KeyChanges{Cursor: since}
	for i, c := range res[2:] {
		str, _ := c.(string)
		n, rec, ok := strings.Cut(str, "|")
		num, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil {
			return ports.KeyChanges{}, fmt.Errorf("keyring: changes: change %q: not seq|record", str)
		}
		if num != since.Seq+uint64(i)+1 {
			return ports.KeyChanges{Cursor: cur, Gap: true}, nil // trimmed past since
		}
		k, err := decode(rec)
		if err != nil {
			return ports.KeyChanges{}, err
		}
		out.Keys = append(out.Keys, k)
		out.Cursor.Seq = num
	}
	if len(out.Keys) == 0 && cur.Seq > since.Seq {
		return ports.KeyChanges{Cursor: cur, Gap: true}, nil
	}
	return out, nil
}

// Load calls each with every key (see [ports.APIKeys]): the position
// first, then the records, a thousand a round trip (HSCAN).
func (s *Store) Load(ctx context.Context, each func(ports.APIKey)) (ports.KeyCursor, error) {
	vals, err := s.rdb.HMGet(ctx, s.meta, "epoch", "seq").Result()
	if err != nil {
		return ports.KeyCursor{}, fmt.Errorf("keyring: load: %w", err)
	}
	var cur ports.KeyCursor
	cur.Epoch, _ = vals[0].(string)
	if seq, ok := vals[1].(string); ok {
		cur.Seq, _ = strconv.ParseUint(seq, 10, 64)
	}
	var c uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.all, c, "", 1000).Result()
		if err != nil {
			return ports.KeyCursor{}, fmt.Errorf("keyring: load: %w", err)
		}
		for i := 1; i < len(kv); i += 2 {
			k, err := decode(kv[i])
			if err != nil {
				return ports.KeyCursor{}, err
			}
			each(k)
		}
		if next == 0 {
			return cur, nil
		}
		c = next
	}
}

// encode returns k's record.
func encode(k ports.APIKey) string {
	var exp int64
	if !k.ExpiresAt.IsZero() {
		exp = k.ExpiresAt.UnixMilli()
	}
	removed := "0"
	if k.Removed {
		removed = "1"
	}
	return strings.Join([]string{k.ID, string(k.Tenant), hex.EncodeToString(k.Hash[:]), k.Prefix,
		strconv.FormatInt(k.CreatedAt.UnixMilli(), 10), strconv.FormatInt(exp, 10), removed}, "|")
}

// errRecord is a record that does not decode: not one the store wrote.
var errRecord = errors.New("keyring: a record that is not one")

// decode returns the key of record rec.
func decode(rec string) (ports.APIKey, error) {
	f := strings.Split(rec, "|")
	if len(f) != 7 {
		return ports.APIKey{}, errRecord
	}
	var k ports.APIKey
	sum, err := hex.DecodeString(f[2])
	created, err1 := strconv.ParseInt(f[4], 10, 64)
	exp, err2 := strconv.ParseInt(f[5], 10, 64)
	if err != nil || err1 != nil || err2 != nil || len(sum) != len(k.Hash) || !domain.ValidTenantID(f[1]) {
		return ports.APIKey{}, errRecord
	}
	k.ID, k.Tenant, k.Prefix, k.Removed = f[0], domain.TenantID(f[1]), f[3], f[6] == "1"
	copy(k.Hash[:], sum)
	k.CreatedAt = time.UnixMilli(created).UTC()
	if exp != 0 {
		k.ExpiresAt = time.UnixMilli(exp).UTC()
	}
	return k, nil
}

// sortKeys sorts ks oldest first, then by id.
func sortKeys(ks []ports.APIKey) {
	for i := 1; i < len(ks); i++ { // few: a tenant's, bounded
		for j := i; j > 0 && older(ks[j], ks[j-1]); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

func older(a, b ports.APIKey) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// newEpoch returns a random epoch, which names the store when a change
// finds it empty.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
