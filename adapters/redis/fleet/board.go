package fleet

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/ports"
)

// MaxPostTTL is the longest a post on the board may live.
const MaxPostTTL = 30 * time.Second

// Board is the board of who is being limited on Redis: each replica's
// post is a string, <prefix>{top:board}:<id>, with the post's TTL, indexed by
// a sorted set, <prefix>{top:board}, of replica ids scored with their post's
// expiry on Redis's clock, its TTL the longest post's (at most
// [MaxPostTTL]). All of them share the hash tag {top:board}: one slot, on a
// Redis Cluster too, so that one script reads them.
//
// Board is safe for concurrent use by multiple goroutines. It does not
// own the client.
type Board struct {
	c     *conn.Client
	index string
}

var _ ports.Board = (*Board)(nil)

var (
	postScript = conn.NewScript("board_post", mustRead("board_post.lua"))
	readScript = conn.NewScript("board_read", mustRead("board_read.lua"))
)

// NewBoard returns the board of the gateways whose keys start with
// prefix. It does no I/O.
func NewBoard(c *conn.Client, prefix string) *Board {
	return &Board{c: c, index: prefix + "{top:board}"}
}

// Key returns the board's index key; a replica's post is the index
// key, a colon and its id.
func (b *Board) Key() string { return b.index }

// Post records data as replica's post for ttl (capped at MaxPostTTL):
// one script run (lua/board_post.lua).
func (b *Board) Post(ctx context.Context, replica string, data []byte, ttl time.Duration) error {
	ttl = min(ttl, MaxPostTTL)
	args := append(postScript.Args(2, 4), b.index, b.index+":"+replica, replica, data, millisUp(ttl), millisUp(MaxPostTTL))
	cmd := goredis.NewCmd(ctx, args...)
	if err := b.c.Eval(ctx, cmd, postScript); err != nil {
		return fmt.Errorf("redis: post on %q: %w", b.index, keyType(err))
	}
	return nil
}

// Posts returns every replica's post alive: one script run
// (lua/board_read.lua).
func (b *Board) Posts(ctx context.Context) (map[string][]byte, error) {
	cmd := goredis.NewCmd(ctx, append(readScript.Args(1, 0), b.index)...)
	if err := b.c.Eval(ctx, cmd, readScript); err != nil {
		return nil, fmt.Errorf("redis: read the posts of %q: %w", b.index, keyType(err))
	}
	vals, err := cmd.StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis: read the posts of %q: %w", b.index, err)
	}
	posts := make(map[string][]byte, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		posts[vals[i]] = []byte(vals[i+1])
	}
	return posts, nil
}

// keyType is err, wrapping ports.ErrKeyType when Redis answered
// WRONGTYPE (something else wrote the key).
func keyType(err error) error {
	if goredis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("%w: %w", ports.ErrKeyType, err)
	}
	return err
}
