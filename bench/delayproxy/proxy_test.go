//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// startProxy serves a proxy to target on a loopback port for the test's
// life and returns its address.
func startProxy(t *testing.T, target string, rtt time.Duration, maxBuffer int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProxy(target, rtt, maxBuffer, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// startEcho serves an echo server on a loopback port for the test's life:
// each connection gets back what it sends, and an end for its end.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A proxy that stalls fails the test rather than hanging it.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c.(*net.TCPConn)
}

// pingTimes returns n round trips of one byte each on c, one at a time.
func pingTimes(t *testing.T, c net.Conn, n int) []time.Duration {
	t.Helper()
	rtts := make([]time.Duration, n)
	b := []byte{0}
	for i := range rtts {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rtts[i] = time.Since(start)
	}
	return rtts
}

// lowQuartile is the 25th percentile of d: what the proxy does, rather
// than what a machine busy elsewhere adds now and then (on 2 shared
// cores, a runnable thread may wait milliseconds for its turn).
func lowQuartile(d []time.Duration) time.Duration { return quantile(d, 1) }

// quantile is the q-th quartile of d.
func quantile(d []time.Duration, q int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*q/4]
}

// TestOrder: every byte comes back once, in order, through a ring much
// smaller than the stream (it wraps and fills thousands of times), on
// several connections at once, and the end comes through after the data.
func TestOrder(t *testing.T) {
	t.Parallel()
	addr := startProxy(t, startEcho(t), time.Millisecond, minBuffer)
	var wg sync.WaitGroup
	for conn := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(conn), 1))
			want := make([]byte, 1<<20)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			c := dial(t, addr)
			go func() {
				for rest := want; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(3*minBuffer))
					if _, err := c.Write(rest[:n]); err != nil {
						t.Errorf("conn %d: write: %v", conn, err)
						return
					}
					rest = rest[n:]
				}
				c.CloseWrite()
			}()
			got, err := io.ReadAll(c) // until the echoed end
			if err != nil {
				t.Errorf("conn %d: read: %v", conn, err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Errorf("conn %d: got %d bytes back, want %d; first difference at byte %d", conn, len(got), len(want), i)
			}
		})
	}
	wg.Wait()
}

// TestLatency: a round trip takes the rtt asked for, once each way (not
// twice, not half), to within the clock's lead and a loaded machine's
// scheduling, and below a millisecond too, where Go's own timers would
// take over 2 ms.
func TestLatency(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	for _, tc := range []struct {
		rtt, lo, hi time.Duration
	}{
		{rtt: 400 * time.Microsecond, lo: 300 * time.Microsecond, hi: 1000 * time.Microsecond},
		{rtt: 5 * time.Millisecond, lo: 4600 * time.Microsecond, hi: 6500 * time.Microsecond},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			t.Parallel()
			c := dial(t, startProxy(t, echo, tc.rtt, 1<<20))
			pingTimes(t, c, 5) // the first connection's set-up
			eventually(t, func() error {
				if got := lowQuartile(pingTimes(t, c, 41)); got < tc.lo || got > tc.hi {
					return fmt.Errorf("round trips' low quartile %v, want %v to %v", got, tc.lo, tc.hi)
				}
				return nil
			})
		})
	}
}

// TestPipelining: requests sent back to back on one connection are all in
// flight at once, each answered one round trip after it was sent, not
// one round trip after the previous answer (nor in batches a round trip
// apart, as a line that reads again only once it is empty would).
func TestPipelining(t *testing.T) {
	t.Parallel()
	const rtt, n, gap = 20 * time.Millisecond, 50, time.Millisecond
	c := dial(t, startProxy(t, startEcho(t), rtt, 1<<20))
	pingTimes(t, c, 1)
	eventually(t, func() error {
		sent := make(chan time.Time, n)
		go func() {
			for i := range n {
				sent <- time.Now()
				if _, err := c.Write([]byte{byte(i)}); err != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
				time.Sleep(gap)
			}
		}()
		took := make([]time.Duration, n)
		b := []byte{0}
		for i := range n {
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			took[i] = time.Since(<-sent)
			if b[0] != byte(i) {
				t.Fatalf("answer %d is %d", i, b[0])
			}
		}
		if got := lowQuartile(took); got < rtt-500*time.Microsecond {
			return fmt.Errorf("answers' low quartile after %v, want about %v", got, rtt)
		}
		if got := quantile(took, 2); got > rtt+3*time.Millisecond {
			return fmt.Errorf("median answer after %v, want about %v", got, rtt)
		}
		return nil
	})
}

// TestConcurrency: 64 connections ping at once, each paying its own round
// trips, not queueing behind the others'.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	const rtt, conns, pings = 10 * time.Millisecond, 64, 10
	addr := startProxy(t, startEcho(t), rtt, 1<<20)
	cs := make([]*net.TCPConn, conns)
	for i := range cs {
		cs[i] = dial(t, addr)
		pingTimes(t, cs[i], 1)
	}
	eventually(t, func() error {
		start := time.Now()
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() { pingTimes(t, c, pings) })
		}
		wg.Wait()
		// Serial would be conns*pings*rtt = 6.4 s.
		if took, want := time.Since(start), pings*rtt; took < want || took > want*5/2 {
			return fmt.Errorf("%d connections × %d round trips took %v, want about %v", conns, pings, took, want)
		}
		return nil
	})
}

// eventually runs check up to three times and fails t with its last
// error if it never passes. A machine busy elsewhere can make a run slow
// but never fast, nor a slow proxy pass: one good run shows what the
// proxy does, and a broken one fails every run.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	var err error
	for range 3 {
		if err = check(); err == nil {
			return
		}
		t.Logf("once more: %v", err)
	}
	t.Error(err)
}

// blockedWriter is a destination that takes nothing until released.
type blockedWriter struct{ release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, errors.New("released")
}

// TestBoundedMemory: a destination that takes nothing stops the line at
// its bound, however much the source offers.
func TestBoundedMemory(t *testing.T) {
	t.Parallel()
	k := startClock(t)
	for _, max := range []int{minBuffer, 64 << 10, 100_000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			t.Parallel()
			l := newLine(0, max)
			src := endless{}
			dst := blockedWriter{make(chan struct{})}
			filled, drained := make(chan error, 1), make(chan error, 1)
			go func() { filled <- l.fill(readerSource{src}, k) }()
			go func() { drained <- l.drain(dst, k) }()
			time.Sleep(200 * time.Millisecond)
			l.mu.Lock()
			held, ring, read := l.w-l.r, len(l.buf), l.w
			l.mu.Unlock()
			if held > int64(max) || ring > max {
				t.Errorf("the line holds %d bytes in a ring of %d, want at most %d", held, ring, max)
			}
			if want := int64(l.max); read != want {
				t.Errorf("the line read %d bytes, want %d (its bound)", read, want)
			}
			l.kill()
			close(dst.release)
			if err := <-filled; err != nil {
				t.Error(err)
			}
			<-drained
		})
	}
}

// endless is a source that never runs dry.
type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }
