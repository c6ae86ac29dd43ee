package redis

import (
	"context"
	"embed"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// prelude is what every limiter script starts with (lua/prelude.lua),
// and generalPath what it ends with (lua/run.lua).
var prelude, generalPath = mustRead("prelude.lua"), mustRead("run.lua")

// newScript returns the limiter script of lua/<name>.lua: the prelude,
// the algorithm's body, then the general path.
func newScript(name string) *conn.Script {
	return conn.NewScript(name, limiterSource(mustRead(name+".lua")))
}

// limiterSource is a limiter script around body (lua/<algorithm>.lua):
// the prelude's shapes return before the body, the body's before the
// general path.
func limiterSource(body string) string { return prelude + "\n" + body + "\n" + generalPath }

func mustRead(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return string(b)
}

// runArgs runs s on c with b's arguments (EVALSHA sha numkeys keys...
// args...: the caller builds them) and returns its reply's integers, read
// into b, of which there must be want. reusable reports whether b may go back to the pool once the reply is
// used: the call is over (a caller that gave up may leave it queued or
// in flight, still to be written).
func runArgs(ctx context.Context, s *conn.Script, c *conn.Client, b *args, want int) (vals []int64, reusable bool, err error) {
	cmd := goredis.NewCmd(ctx, b.a...)
	err = c.Eval(ctx, cmd, s)
	if err == nil {
		reusable = true
		var ok bool
		if vals, ok = b.replyInts(cmd.Val()); !ok {
			err = fmt.Errorf("script returned %T, want integers", cmd.Val())
		}
	}
	if err == nil && len(vals) != want {
		err = fmt.Errorf("script returned %d values, want %d", len(vals), want)
	}
	if err != nil {
		return nil, reusable, fmt.Errorf("redis: %s %s: %w", s.Name(), argString(b.a[3]), err)
	}
	return vals, true, nil
}

// argString is an argument as the error messages show it.
func argString(a any) string {
	if p, ok := a.(*string); ok {
		return *p
	}
	return fmt.Sprint(a)
}
