// Package freeport hands tests loopback TCP ports for servers they start
// (Redis nodes in containers, edge proxies, gateway replicas).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Loopback returns a TCP port that was free on 127.0.0.1 a moment ago.
// It is drawn at random below the kernel's ephemeral range, never from
// it: an ephemeral port free now can become the source port of any
// outgoing connection a moment later (a Redis Cluster node's bus port
// once failed to bind that way), and a port below the range never does.
// The process never hands out the same port twice.
func Loopback() (int, error) {
	lo, hi := span()
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("freeport: no free loopback port in [%d, %d) after 200 tries", lo, hi)
}

// span is where Loopback draws from: from 10000 up to the start of the
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), or up to
// 32768 where that cannot be read or leaves too little room.
func span() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if start, err := strconv.Atoi(f[0]); err == nil && start > lo+1000 {
			hi = start
		}
	}
	return lo, hi
}
