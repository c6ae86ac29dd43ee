//go:build linux

package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// ringAt returns a line whose 8-byte ring holds the stream bytes from
// r to w, byte i of the stream being 'a'+i%26.
func ringAt(r, w int64) *line {
	l := newLine(0, 1<<20)
	l.buf = make([]byte, 8)
	l.r, l.w = r, w
	for pos := r; pos < w; pos++ {
		l.buf[pos&7] = byte('a' + pos%26)
	}
	return l
}

func stream(from, to int64) []byte {
	var b []byte
	for pos := from; pos < to; pos++ {
		b = append(b, byte('a'+pos%26))
	}
	return b
}

// TestRing: span and grow keep every byte at its stream offset, wrapped
// or not, empty or full.
func TestRing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r, w int64
	}{
		{"empty", 3, 3},
		{"inside", 1, 6},
		{"to the end", 2, 8},
		{"wrapped", 5, 11},
		{"full, aligned", 8, 16},
		{"full, wrapped", 13, 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := ringAt(tc.r, tc.w)
			if got, want := bytes.Join(l.span(nil, tc.r, tc.w), nil), stream(tc.r, tc.w); !bytes.Equal(got, want) {
				t.Errorf("span(%d, %d) = %q, want %q", tc.r, tc.w, got, want)
			}
			l.grow()
			if got, want := len(l.buf), 16; got != want {
				t.Fatalf("grown ring of %d bytes, want %d", got, want)
			}
			if got, want := bytes.Join(l.span(nil, tc.r, tc.w), nil), stream(tc.r, tc.w); !bytes.Equal(got, want) {
				t.Errorf("after grow, span(%d, %d) = %q, want %q", tc.r, tc.w, got, want)
			}
		})
	}
}

// TestClock: waiters wake in due order at about their times, a waiter
// due before the one the timer is set for re-arms it, and one already
// due wakes at once.
func TestClock(t *testing.T) {
	t.Parallel()
	k := startClock(t)
	start := nanotime()
	late, early, now := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	for _, w := range []struct {
		after time.Duration
		c     chan struct{}
	}{{300 * time.Millisecond, late}, {20 * time.Millisecond, early}, {-time.Millisecond, now}} {
		if err := k.wakeAt(start+int64(w.after), w.c); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		name   string
		c      chan struct{}
		lo, hi time.Duration
	}{
		// Generous upper bounds: a loaded machine wakes late now and then.
		{"already due", now, 0, 100 * time.Millisecond},
		{"due in 20 ms, after one due in 300 ms", early, 20*time.Millisecond - time.Duration(maxLead), 150 * time.Millisecond},
		{"due in 300 ms", late, 300*time.Millisecond - time.Duration(maxLead), 450 * time.Millisecond},
	} {
		<-w.c
		if got := time.Duration(nanotime() - start); got < w.lo || got > w.hi {
			t.Errorf("%s: woken after %v, want %v to %v", w.name, got, w.lo, w.hi)
		}
	}
}

// startClock runs a clock for the test's life.
func startClock(t *testing.T) *clock {
	t.Helper()
	k, err := newClock()
	if err != nil {
		t.Fatal(err)
	}
	clocked := make(chan error, 1)
	go func() { clocked <- k.run() }()
	t.Cleanup(func() {
		k.Close()
		if err := <-clocked; err != nil {
			t.Errorf("clock: %v", err)
		}
	})
	return k
}

// TestArrival: a chunk is stamped with when it reached the socket, not
// when it was read.
func TestArrival(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := dial(t, ln.Addr().String())
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	src, err := newTCPSource(sc.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel turns receive timestamps on a moment after the first
	// socket asks (a deferred static key): the first packets may have
	// none. Wait for one.
	for i := 0; ; i++ {
		if _, err := c.Write([]byte("warm")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		_, arrived, err := src.read(make([]byte, 16))
		if err != nil {
			t.Fatal(err)
		}
		if nanotime()-arrived >= int64(time.Millisecond) {
			break
		}
		if i == 100 {
			t.Fatal("no receive timestamps after 100 reads")
		}
	}
	const wait = 50 * time.Millisecond
	for i := range 3 {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(wait) // the bytes wait in the socket
		p := make([]byte, 16)
		n, arrived, err := src.read(p)
		if err != nil || string(p[:n]) != "ping" {
			t.Fatalf("read %d: %q, %v", i, p[:n], err)
		}
		if age := time.Duration(nanotime() - arrived); age < wait || age > 10*wait {
			t.Errorf("read %d: arrived %v ago, want about %v", i, age, wait)
		}
	}
	c.CloseWrite()
	if n, _, err := src.read(make([]byte, 16)); n != 0 || err != io.EOF {
		t.Errorf("after the end: %d, %v, want 0, EOF", n, err)
	}
}
