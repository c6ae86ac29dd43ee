package redis

import "sync"

// args builds one script call's arguments without boxing each value:
// the strings and integers live in the builder, and the call holds
// pointers to them (go-redis writes a *string or *int64 as its value,
// and reads a *string key for a Redis Cluster slot), so that the
// arguments of a decision cost no allocation of their own. A builder
// is reused (getArgs, putArgs) once its call's reply has been read,
// never while a flusher may still write the call.
type args struct {
	a     []any
	ints  []int64
	strs  []string
	bytes []bytesArg
	buf   []byte  // what bytes point into
	reply []int64 // the reply's integers, read by replyInts
}

// bytesArg is an argument built from bytes (the shadow flags, the
// kinds): a pointer to one writes its bytes, through
// encoding.BinaryMarshaler.
type bytesArg []byte

// MarshalBinary implements encoding.BinaryMarshaler.
func (b *bytesArg) MarshalBinary() ([]byte, error) { return *b, nil }

var argsPool = sync.Pool{New: func() any { return new(args) }}

// getArgs returns a builder with room for n arguments, ints integers,
// strs strings and two byte strings: appends within that never move
// what a pointer already points at.
func getArgs(n, ints, strs int) *args {
	b := argsPool.Get().(*args)
	b.a = grow(b.a, n)
	b.ints = grow(b.ints, ints)
	b.strs = grow(b.strs, strs)
	b.bytes = grow(b.bytes, 3)
	b.buf = b.buf[:0]
	return b
}

// grow returns s emptied, with room for n.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	clear(s[:cap(s)]) // what the last call held is not kept alive
	return s[:0]
}

// putArgs returns b to the pool: its call is over.
func putArgs(b *args) { argsPool.Put(b) }

// int appends v as an argument.
func (b *args) int(v int64) {
	if v >= 0 && v < 256 {
		b.a = append(b.a, v) // boxed without allocating
		return
	}
	b.ints = append(b.ints, v)
	b.a = append(b.a, &b.ints[len(b.ints)-1])
}

// str appends s as an argument.
func (b *args) str(s string) {
	b.strs = append(b.strs, s)
	b.a = append(b.a, &b.strs[len(b.strs)-1])
}

// setStr sets argument i to s.
func (b *args) setStr(i int, s string) {
	b.strs = append(b.strs, s)
	b.a[i] = &b.strs[len(b.strs)-1]
}

// raw appends a copy of p as an argument.
func (b *args) raw(p []byte) {
	start := len(b.buf)
	b.buf = append(b.buf, p...)
	b.rawFrom(start)
}

// rawFrom appends b.buf[start:], written by the caller, as an argument.
// (A later append to buf may move it; the argument keeps the bytes it
// was given.)
func (b *args) rawFrom(start int) {
	b.bytes = append(b.bytes, bytesArg(b.buf[start:len(b.buf):len(b.buf)]))
	b.a = append(b.a, &b.bytes[len(b.bytes)-1])
}

// put sets argument k (a layout constant: limCost, …) of the limit
// whose arguments start at b.a[base] to v.
func (b *args) put(base, k int, v int64) {
	i := base + k - 1
	if v >= 0 && v < 256 {
		b.a[i] = v // boxed without allocating
		return
	}
	b.ints = append(b.ints, v)
	b.a[i] = &b.ints[len(b.ints)-1]
}

// replyInts returns the integers of reply, a script's array reply, in
// b (valid until b is reused), and whether it was one.
func (b *args) replyInts(reply any) ([]int64, bool) {
	vals, ok := reply.([]any)
	if !ok {
		return nil, false
	}
	b.reply = grow(b.reply, len(vals))
	for _, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return nil, false
		}
		b.reply = append(b.reply, n)
	}
	return b.reply, true
}
