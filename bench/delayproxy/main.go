//go:build linux

// Command delayproxy is a TCP proxy that adds a fixed round trip: every
// chunk it reads from either side is written to the other side half the
// round trip later, in order. It is the network lane of the Redis
// benchmarks (scripts/netlane.sh) on kernels without tc netem.
//
//	delayproxy -listen 10.77.0.1:16380 -target 10.77.0.2:6379 -rtt 600us
//
// Each direction of a connection is a delay line, not a sleep per
// request: many chunks are in flight at once, so pipelined and
// concurrent callers each pay one round trip, as on a real network. A
// direction is a pair of goroutines (one reads, one writes) and holds at
// most -max-buffer bytes in flight; past that it stops reading, and TCP
// pushes back on the sender.
//
// Go's timers wake about 1 ms late here (the runtime's netpoller waits
// in whole milliseconds), too coarse for a 0.2 ms lane, so one clock on
// a timerfd times every line (clock_linux.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "delayproxy:", err)
		os.Exit(1)
	}
}

// run parses args, listens and proxies until ctx is done.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("delayproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:16380", "address to listen on")
	target := fs.String("target", "127.0.0.1:6379", "address to forward to")
	rtt := fs.Duration("rtt", 0, "round trip to add; each direction waits half of it")
	maxBuf := fs.Int("max-buffer", 4<<20, "bytes in flight per direction at most")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rtt < 0 || *maxBuf < minBuffer {
		return fmt.Errorf("-rtt must be >= 0 and -max-buffer >= %d", minBuffer)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	p, err := newProxy(*target, *rtt, *maxBuf, log.New(stderr, "delayproxy: ", log.LstdFlags))
	if err != nil {
		ln.Close()
		return err
	}
	p.log.Printf("%s -> %s, round trip +%v", ln.Addr(), *target, *rtt)
	return p.serve(ctx, ln)
}

// proxy forwards each connection accepted to target, through a delay
// line each way.
type proxy struct {
	target    string
	delay     time.Duration // one way: half the round trip
	maxBuffer int           // bytes in flight per direction at most
	log       *log.Logger
	clock     *clock // times every line; serve runs it
}

// newProxy returns a proxy to target that adds rtt to each round trip
// and holds at most maxBuffer bytes per direction.
func newProxy(target string, rtt time.Duration, maxBuffer int, lg *log.Logger) (*proxy, error) {
	k, err := newClock()
	if err != nil {
		return nil, err
	}
	return &proxy{target: target, delay: rtt / 2, maxBuffer: maxBuffer, log: lg, clock: k}, nil
}

// serve accepts on ln and runs the clock until ctx is done (it then
// returns nil) or the clock fails; either way it closes ln and the
// clock. Connections still open are left to the process's exit: their
// lines wait on the clock for ever.
func (p *proxy) serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	clocked := make(chan struct{})
	go func() {
		defer close(clocked)
		if err := p.clock.run(); err != nil {
			cancel(err)
		}
	}()
	defer func() {
		p.clock.Close()
		<-clocked
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
					return err
				}
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			ln.Close()
			return err
		}
		go p.handle(c.(*net.TCPConn))
	}
}

// handle proxies one client connection until both directions end.
func (p *proxy) handle(client *net.TCPConn) {
	defer client.Close()
	c, err := net.Dial("tcp", p.target)
	if err != nil {
		p.log.Printf("dial %s: %v", p.target, err)
		return
	}
	up := c.(*net.TCPConn)
	defer up.Close()
	done := make(chan error, 1)
	go func() { done <- relay(up, client, p.delay, p.maxBuffer, p.clock) }()
	err = relay(client, up, p.delay, p.maxBuffer, p.clock)
	if err := errors.Join(err, <-done); err != nil && !errors.Is(err, net.ErrClosed) {
		p.log.Printf("%s: %v", client.RemoteAddr(), err)
	}
}
